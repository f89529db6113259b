/* The choice behind beanstalkctl handoff. Only the primary's own view is
 * used: its "standbys" list says which standbys are connected and in sync
 * ("streaming"; a witness is listed as "witness", a lagging standby as
 * "catching-up") and how far each has flushed, which is what the
 * switchover waits for before it hands over. A standby entry without a
 * node_id cannot be named in /switchover?to= and is passed over; missing
 * numbers rank lowest. When nothing qualifies, the reason lists every
 * standby with its state so that the operator sees why. */
#include "node/ctl/ctl_handoff.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *str(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The number member key of obj, or -1 when absent or not a number. */
static double num(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* True when the standby (name, flushed, lag) ranks before the best so far
 * (out->target): more flushed, then less lag, then the lower name. */
static bool better(const bq_ctl_handoff_t *out, const char *name, double flushed, double lag)
{
    if (out->target == NULL)
        return true;
    if (flushed != out->flushed_lsn)
        return flushed > out->flushed_lsn;
    if (lag != out->lag_records) /* an absent lag (-1) ranks after any known one */
        return out->lag_records < 0 || (lag >= 0 && lag < out->lag_records);
    return strcmp(name, out->target) < 0;
}

/* "n2: disconnected, n3: witness" into buf (cap > 8): every entry of list
 * that fits whole, then ", ..." if some did not. */
static void list_states(const cJSON *list, char *buf, size_t cap)
{
    size_t used = 0, room = cap - 5; /* ", ..." fits after any entry */
    const cJSON *s;
    buf[0] = '\0';
    cJSON_ArrayForEach(s, list)
    {
        const char *name = str(s, "node_id"), *state = str(s, "state");
        int n = snprintf(buf + used, room - used, "%s%.64s: %.32s", used ? ", " : "",
                         name ? name : "(no node_id)", state ? state : "(no state)");
        if (n < 0 || (size_t)n >= room - used) {
            snprintf(buf + used, cap - used, ", ...");
            return;
        }
        used += (size_t)n;
    }
}

static void choose_standby(const cJSON *doc, bq_ctl_handoff_t *out)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(doc, "standbys");
    const cJSON *s;
    if (!cJSON_IsArray(list))
        list = NULL;
    cJSON_ArrayForEach(s, list)
    {
        const char *name = str(s, "node_id"), *state = str(s, "state");
        if (name == NULL || *name == '\0' || state == NULL || strcmp(state, "streaming") != 0)
            continue;
        double flushed = num(s, "flushed_lsn"), lag = num(s, "lag_records");
        if (better(out, name, flushed, lag)) {
            out->target = name;
            out->flushed_lsn = flushed;
            out->lag_records = lag;
        }
    }
    if (out->target) {
        out->kind = BQ_CTL_HANDOFF_TARGET;
        return;
    }
    out->kind = BQ_CTL_HANDOFF_NO_TARGET;
    if (cJSON_GetArraySize(list) == 0) {
        snprintf(out->why, sizeof out->why, "no standby to hand off to (the primary lists none)");
        return;
    }
    char states[256];
    list_states(list, states, sizeof states);
    snprintf(out->why, sizeof out->why, "no streaming standby to hand off to (%s)", states);
}

void bq_ctl_handoff_choose(const cJSON *doc, bq_ctl_handoff_t *out)
{
    memset(out, 0, sizeof *out);
    out->flushed_lsn = -1;
    out->lag_records = -1;
    const char *role = str(doc, "role");
    if (role == NULL) {
        out->kind = BQ_CTL_HANDOFF_NO_ROLE;
        snprintf(out->why, sizeof out->why, "the node's /status does not say its role");
    } else if (strcmp(role, "primary") != 0) {
        out->kind = BQ_CTL_HANDOFF_NOT_PRIMARY;
        snprintf(out->why, sizeof out->why, "not the primary: nothing to hand off (role %.64s)",
                 role);
    } else {
        choose_standby(doc, out);
    }
}
