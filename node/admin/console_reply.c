/* Beanstalk replies and their YAML bodies (console_reply.h). */
#include "node/admin/console_reply.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/parse.h"

long bq_console_parse_reply(const char *buf, size_t len, bq_console_reply_t *out)
{
    const char *nl = memchr(buf, '\n', len < 256 ? len : 256);
    if (nl == NULL)
        return len < 256 ? BQ_CONSOLE_REPLY_PARTIAL : BQ_CONSOLE_REPLY_BAD;
    size_t line_len = (size_t)(nl - buf);
    if (line_len < 2 || buf[line_len - 1] != '\r')
        return BQ_CONSOLE_REPLY_BAD;
    line_len--;
    *out = (bq_console_reply_t){.line = buf, .line_len = line_len};
    size_t head = line_len + 2;
    int64_t n = bq_reply_body_size(buf, line_len);
    if (n == BQ_REPLY_NO_BODY)
        return (long)head;
    if (n < 0 || (uint64_t)n > BQ_CONSOLE_REPLY_MAX)
        return BQ_CONSOLE_REPLY_BAD;
    if (len < head + (size_t)n + 2)
        return BQ_CONSOLE_REPLY_PARTIAL;
    if (buf[head + (size_t)n] != '\r' || buf[head + (size_t)n + 1] != '\n')
        return BQ_CONSOLE_REPLY_BAD;
    out->body = buf + head;
    out->body_len = (size_t)n;
    return (long)(head + (size_t)n + 2);
}

int bq_console_reply_is(const bq_console_reply_t *r, const char *word)
{
    size_t w = strlen(word);
    return r->line_len >= w && memcmp(r->line, word, w) == 0 &&
           (r->line_len == w || r->line[w] == ' ');
}

/* The next line of body[*at..len) into [*s, *e); false at the end. */
static int next_line(const char *body, size_t len, size_t *at, const char **s, const char **e)
{
    if (*at >= len)
        return 0;
    const char *p = body + *at;
    const char *nl = memchr(p, '\n', len - *at);
    *s = p;
    *e = nl ? nl : body + len;
    *at = (size_t)(*e - body) + (nl ? 1 : 0);
    return 1;
}

static int all_digits(const char *s, size_t n)
{
    if (n == 0 || n > 15)
        return 0;
    for (size_t i = (s[0] == '-' && n > 1) ? 1 : 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* Adds key: value (value unquoted) to obj; 0, or -1 when out of memory. */
static int add_pair(cJSON *obj, const char *k, size_t klen, const char *v, size_t vlen)
{
    char key[64], val[256];
    if (klen >= sizeof key || vlen >= sizeof val)
        return 0; /* no key of the protocol is that long: skipped */
    memcpy(key, k, klen);
    key[klen] = '\0';
    if (vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"') {
        v++;
        vlen -= 2;
    }
    memcpy(val, v, vlen);
    val[vlen] = '\0';
    cJSON *item =
        all_digits(val, vlen) ? cJSON_CreateNumber(strtod(val, NULL)) : cJSON_CreateString(val);
    if (item == NULL)
        return -1;
    cJSON_AddItemToObject(obj, key, item);
    return 0;
}

cJSON *bq_console_yaml_map(const char *body, size_t len)
{
    cJSON *obj = cJSON_CreateObject();
    const char *s, *e;
    size_t at = 0;
    while (obj && next_line(body, len, &at, &s, &e)) {
        const char *colon = memchr(s, ':', (size_t)(e - s));
        if (colon == NULL || colon == s || colon + 1 >= e || colon[1] != ' ')
            continue; /* "---" and anything else that is not a pair */
        if (add_pair(obj, s, (size_t)(colon - s), colon + 2, (size_t)(e - colon - 2)) != 0) {
            cJSON_Delete(obj);
            obj = NULL;
        }
    }
    return obj;
}

cJSON *bq_console_yaml_list(const char *body, size_t len, size_t max)
{
    cJSON *arr = cJSON_CreateArray();
    const char *s, *e;
    size_t at = 0, n = 0;
    while (arr && n < max && next_line(body, len, &at, &s, &e)) {
        if (e - s < 3 || s[0] != '-' || s[1] != ' ' || e - s - 2 > 200)
            continue;
        char name[256];
        memcpy(name, s + 2, (size_t)(e - s - 2));
        name[e - s - 2] = '\0';
        cJSON *item = cJSON_CreateString(name);
        if (item == NULL) {
            cJSON_Delete(arr);
            return NULL;
        }
        cJSON_AddItemToArray(arr, item);
        n++;
    }
    return arr;
}
