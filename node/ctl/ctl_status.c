/* Rendering of beanstalkctl status. Each node's answer becomes either a
 * parsed /status document or an error line; the table then reads only the
 * fields it shows, each of which may be missing or of another type (a node
 * of another version, a half-started node): such a cell prints "-" rather
 * than failing the whole command. A standby's lag comes from the primary's
 * view of it (its "standbys" list), the only place the lag is measured. */
#include "node/ctl/ctl_status.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "node/ctl/ctl_table.h"

#define CELL 128

enum { C_NODE, C_ROLE, C_EPOCH, C_LAST, C_COMMIT, C_PRIMARY, C_SYNC, C_LAG, C_READY, C_URL, NCOLS };

static const char *const node_header[NCOLS] = {
    "NODE",    "ROLE", "EPOCH",        "LAST-LSN", "COMMIT-LSN",
    "PRIMARY", "SYNC", "LAG(records)", "READY",    "URL",
};

enum { S_NAME, S_STATE, S_WRITTEN, S_FLUSHED, S_APPLIED, S_LAGREC, S_LAGBYTES, S_LAGSEC, NSCOLS };

static const char *const standby_header[NSCOLS] = {
    "NAME", "STATE", "WRITTEN", "FLUSHED", "APPLIED", "LAG-RECORDS", "LAG-BYTES", "LAG-SECONDS",
};

int bq_ctl_status_set(bq_ctl_node_t *n, const char *url, const char *transport_error,
                      long http_status, const char *body)
{
    memset(n, 0, sizeof *n);
    n->url = url;
    if (transport_error) {
        snprintf(n->error, sizeof n->error, "unreachable: %s", transport_error);
        return -1;
    }
    if (http_status != 200) {
        /* The first line of the body usually says why (503 "not ready"...). */
        int len = body ? (int)strcspn(body, "\r\n") : 0;
        snprintf(n->error, sizeof n->error, "bad answer: HTTP %ld%s%.*s", http_status,
                 len ? ": " : "", len > 200 ? 200 : len, body ? body : "");
        return -1;
    }
    n->status = body ? cJSON_Parse(body) : NULL;
    if (!cJSON_IsObject(n->status)) {
        cJSON_Delete(n->status);
        n->status = NULL;
        snprintf(n->error, sizeof n->error, "bad answer: /status is not a JSON object");
        return -1;
    }
    return 0;
}

void bq_ctl_status_clear(bq_ctl_node_t *n)
{
    cJSON_Delete(n->status);
    n->status = NULL;
}

/* The string member key of obj, or NULL. */
static const char *str(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The number member key of obj written into buf (integers without a
 * fraction, others with three decimals), or NULL. */
static const char *num(const cJSON *obj, const char *key, char *buf)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v))
        return NULL;
    double d = v->valuedouble;
    bool integral = d > -1e18 && d < 1e18 && d == (double)(long long)d;
    snprintf(buf, CELL, integral ? "%.0f" : "%.3f", d);
    return buf;
}

static const char *yes_no(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return !cJSON_IsBool(v) ? NULL : cJSON_IsTrue(v) ? "yes" : "no";
}

static bool is_primary(const cJSON *doc)
{
    const char *role = str(doc, "role");
    return role && strcmp(role, "primary") == 0;
}

/* "primary", or "primary(fenced)" when the node says it is fenced. */
static const char *role_cell(const cJSON *doc, char *buf)
{
    const char *role = str(doc, "role");
    if (role == NULL)
        return NULL;
    snprintf(buf, CELL, "%s%s", role,
             cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "fenced")) ? "(fenced)" : "");
    return buf;
}

/* "state (N in sync, M needed)", or what of it is present. */
static const char *sync_cell(const cJSON *doc, char *buf)
{
    const cJSON *sync = cJSON_GetObjectItemCaseSensitive(doc, "sync");
    char in[CELL], want[CELL];
    const char *state = str(sync, "state");
    if (!cJSON_IsObject(sync) || state == NULL)
        return NULL;
    if (num(sync, "in_sync", in) && num(sync, "standbys", want))
        snprintf(buf, CELL, "%.40s (%.24s in sync, %.24s needed)", state, in, want);
    else
        snprintf(buf, CELL, "%s", state);
    return buf;
}

/* The entry for node id in a primary's "standbys" list, or NULL. */
static const cJSON *standby_entry(const cJSON *primary, const char *id)
{
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(primary, "standbys"))
    {
        const char *name = str(s, "node_id");
        if (name && strcmp(name, id) == 0)
            return s;
    }
    return NULL;
}

/* A standby's lag in records as the primary of the highest epoch sees it. */
static const char *lag_cell(const bq_ctl_node_t *nodes, size_t n, const cJSON *doc, char *buf)
{
    const char *id = str(doc, "node_id");
    const cJSON *best = NULL;
    double best_epoch = -1;
    for (size_t k = 0; id && !is_primary(doc) && k < n; k++) {
        const cJSON *epoch = cJSON_GetObjectItemCaseSensitive(nodes[k].status, "epoch");
        double e = cJSON_IsNumber(epoch) ? epoch->valuedouble : 0;
        const cJSON *entry =
            is_primary(nodes[k].status) ? standby_entry(nodes[k].status, id) : NULL;
        if (entry && e > best_epoch) {
            best = entry;
            best_epoch = e;
        }
    }
    return best ? num(best, "lag_records", buf) : NULL;
}

static int node_row(bq_ctl_table_t *t, const bq_ctl_node_t *nodes, size_t n, size_t k)
{
    const bq_ctl_node_t *node = &nodes[k];
    if (node->status == NULL)
        return bq_ctl_table_note(t, node->url, node->error);
    const cJSON *doc = node->status;
    char buf[NCOLS][CELL];
    const char *id = str(doc, "node_id");
    const char *cells[NCOLS] = {
        [C_NODE] = id ? id : node->url,
        [C_ROLE] = role_cell(doc, buf[C_ROLE]),
        [C_EPOCH] = num(doc, "epoch", buf[C_EPOCH]),
        [C_LAST] = num(doc, "last_lsn", buf[C_LAST]),
        [C_COMMIT] = num(doc, "commit_lsn", buf[C_COMMIT]),
        [C_PRIMARY] = str(doc, "primary"),
        [C_SYNC] = sync_cell(doc, buf[C_SYNC]),
        [C_LAG] = lag_cell(nodes, n, doc, buf[C_LAG]),
        [C_READY] = yes_no(doc, "ready"),
        [C_URL] = node->url,
    };
    return bq_ctl_table_row(t, cells);
}

static int standby_row(bq_ctl_table_t *t, const cJSON *s)
{
    char buf[NSCOLS][CELL];
    const cJSON *sec = cJSON_GetObjectItemCaseSensitive(s, "lag_seconds");
    if (cJSON_IsNumber(sec))
        snprintf(buf[S_LAGSEC], CELL, "%.3f", sec->valuedouble);
    const char *cells[NSCOLS] = {
        [S_NAME] = str(s, "node_id"),
        [S_STATE] = str(s, "state"),
        [S_WRITTEN] = num(s, "written_lsn", buf[S_WRITTEN]),
        [S_FLUSHED] = num(s, "flushed_lsn", buf[S_FLUSHED]),
        [S_APPLIED] = num(s, "applied_lsn", buf[S_APPLIED]),
        [S_LAGREC] = num(s, "lag_records", buf[S_LAGREC]),
        [S_LAGBYTES] = num(s, "lag_bytes", buf[S_LAGBYTES]),
        [S_LAGSEC] = cJSON_IsNumber(sec) ? buf[S_LAGSEC] : NULL,
    };
    return bq_ctl_table_row(t, cells);
}

/* "standbys of NODE:" and their table, for a primary that lists them. */
static int standbys(FILE *out, const bq_ctl_node_t *node)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(node->status, "standbys");
    const char *id = str(node->status, "node_id");
    if (!cJSON_IsArray(list))
        return 0;
    fprintf(out, "\nstandbys of %s:%s\n", id ? id : node->url,
            cJSON_GetArraySize(list) == 0 ? " none" : "");
    if (cJSON_GetArraySize(list) == 0)
        return 0;
    bq_ctl_table_t *t = bq_ctl_table_new(NSCOLS, standby_header);
    int r = t ? 0 : -ENOMEM;
    const cJSON *s;
    cJSON_ArrayForEach(s, list)
    {
        if (r == 0)
            r = standby_row(t, s);
    }
    if (r == 0)
        bq_ctl_table_print(t, out, "  ");
    bq_ctl_table_free(t);
    return r;
}

int bq_ctl_status_table(FILE *out, const bq_ctl_node_t *nodes, size_t n)
{
    bq_ctl_table_t *t = bq_ctl_table_new(NCOLS, node_header);
    int r = t ? 0 : -ENOMEM;
    for (size_t k = 0; r == 0 && k < n; k++)
        r = node_row(t, nodes, n, k);
    if (r == 0)
        bq_ctl_table_print(t, out, "");
    bq_ctl_table_free(t);
    for (size_t k = 0; r == 0 && k < n; k++)
        if (is_primary(nodes[k].status))
            r = standbys(out, &nodes[k]);
    return r;
}

static cJSON *json_node(const bq_ctl_node_t *node)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *status = node->status ? cJSON_Duplicate(node->status, true) : cJSON_CreateNull();
    cJSON *error = node->status ? cJSON_CreateNull() : cJSON_CreateString(node->error);
    if (o == NULL || status == NULL || error == NULL ||
        !cJSON_AddStringToObject(o, "url", node->url)) {
        cJSON_Delete(o);
        cJSON_Delete(status);
        cJSON_Delete(error);
        return NULL;
    }
    cJSON_AddItemToObject(o, "status", status);
    cJSON_AddItemToObject(o, "error", error);
    return o;
}

int bq_ctl_status_json(FILE *out, const bq_ctl_node_t *nodes, size_t n)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *list = root ? cJSON_AddArrayToObject(root, "nodes") : NULL;
    char *text = NULL;
    for (size_t k = 0; list && k < n; k++) {
        cJSON *o = json_node(&nodes[k]);
        if (o == NULL) {
            list = NULL;
            break;
        }
        cJSON_AddItemToArray(list, o);
    }
    if (list)
        text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (text == NULL)
        return -ENOMEM;
    fprintf(out, "%s\n", text);
    cJSON_free(text);
    return 0;
}

int bq_ctl_status_primary(const bq_ctl_node_t *nodes, size_t n, char *err, size_t errlen)
{
    int found = -1;
    size_t nprimary = 0, nanswered = 0;
    char names[256] = "";
    for (size_t k = 0; k < n; k++) {
        nanswered += nodes[k].status != NULL;
        if (!is_primary(nodes[k].status))
            continue;
        const char *id = str(nodes[k].status, "node_id");
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", nprimary ? ", " : "",
                 id ? id : nodes[k].url);
        found = (int)k;
        nprimary++;
    }
    if (nprimary == 1)
        return found;
    if (nprimary == 0)
        snprintf(err, errlen, "no primary among the %zu node(s) that answered (of %zu)", nanswered,
                 n);
    else
        snprintf(err, errlen, "%zu nodes say they are primary: %s", nprimary, names);
    return -1;
}
