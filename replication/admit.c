/* Admission decisions (admit.h): a linear scan over the open connections,
 * which are few (tens). */
#include "replication/admit.h"

#include <string.h>

bool bq_admit_evictable(bq_admit_state_t st)
{
    return st == BQ_ADMIT_NEW || st == BQ_ADMIT_IDLE;
}

/* The index of the oldest evictable entry (of source, when not NULL), or
 * -1; *count gets how many evictable entries there are. */
static long oldest(const bq_admit_entry_t *open, size_t n, const char *source, size_t *count)
{
    long best = -1;
    *count = 0;
    for (size_t i = 0; i < n; i++) {
        if (!bq_admit_evictable(open[i].state))
            continue;
        if (source && strcmp(open[i].source, source) != 0)
            continue;
        (*count)++;
        if (best < 0 || open[i].since < open[best].since)
            best = (long)i;
    }
    return best;
}

bq_admit_decision_t bq_admit_decide(const bq_admit_entry_t *open, size_t n, const char *source,
                                    const bq_admit_limits_t *lim)
{
    bq_admit_decision_t d = {.admit = true, .evict = -1};
    size_t mine, any;
    long own = oldest(open, n, source ? source : "", &mine);

    if (mine >= lim->max_per_source) {
        d.evict = own;
        d.per_source = true;
        return d;
    }
    if (n < lim->max_total)
        return d;
    d.evict = oldest(open, n, NULL, &any);
    d.admit = d.evict >= 0;
    return d;
}
