/* YAML body checks for the session fuzzer. The bodies are line-oriented and
 * flat, so a line scanner is enough: no YAML library is involved. */
#include "yaml_check.h"

#include <string.h>

#include "fuzz.h"

/* Keys whose values are counters that can never be negative. */
static bool is_counter(const char *key, size_t len)
{
    static const char *const exact[] = {"job-timeouts", "reserves", "timeouts", "releases",
                                        "buries",       "kicks",    "id"};
    if ((len > 8 && memcmp(key, "current-", 8) == 0) || (len > 4 && memcmp(key, "cmd-", 4) == 0) ||
        (len > 6 && memcmp(key, "total-", 6) == 0))
        return true;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        if (strlen(exact[i]) == len && memcmp(exact[i], key, len) == 0)
            return true;
    }
    return false;
}

static bool is_state(const char *v, size_t len)
{
    static const char *const states[] = {"ready", "reserved", "delayed", "buried"};
    for (size_t i = 0; i < 4; i++) {
        if (strlen(states[i]) == len && memcmp(states[i], v, len) == 0)
            return true;
    }
    return false;
}

static bool all_digits(const char *v, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
    }
    return len > 0;
}

static void check_line(const char *line, size_t len)
{
    if (len >= 2 && line[0] == '-' && line[1] == ' ')
        return;
    const char *colon = memchr(line, ':', len);
    BQF_CHECK(colon && colon > line && (size_t)(colon - line) + 1 < len && colon[1] == ' ',
              "YAML line \"%.*s\" is not key: value", (int)len, line);
    size_t klen = (size_t)(colon - line);
    const char *v = colon + 2;
    size_t vlen = len - klen - 2;
    if (is_counter(line, klen)) {
        /* "id" is also the server's hex id in `stats`: only job ids are numbers. */
        if (klen == 2 && !all_digits(v, vlen))
            return;
        BQF_CHECK(all_digits(v, vlen) && vlen <= 9, "counter \"%.*s\" out of range", (int)len,
                  line);
    }
    if (klen == 5 && memcmp(line, "state", 5) == 0)
        BQF_CHECK(is_state(v, vlen), "job state \"%.*s\"", (int)vlen, v);
}

void bqf_yaml_check(const char *body, size_t len)
{
    BQF_CHECK(len >= 4 && memcmp(body, "---\n", 4) == 0, "YAML body without ---");
    BQF_CHECK(body[len - 1] == '\n', "YAML body does not end with a newline");
    BQF_CHECK(memchr(body, '\r', len) == NULL, "CR inside a YAML body");
    size_t pos = 4;
    while (pos < len) {
        const char *nl = memchr(body + pos, '\n', len - pos);
        size_t ll = (size_t)(nl - (body + pos));
        check_line(body + pos, ll);
        pos += ll + 1;
    }
}

bool bqf_yaml_u64(const char *body, size_t len, const char *key, uint64_t *out)
{
    size_t kl = strlen(key);
    size_t pos = 0;
    while (pos < len) {
        const char *nl = memchr(body + pos, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - (body + pos)) : len - pos;
        const char *l = body + pos;
        if (ll > kl + 2 && memcmp(l, key, kl) == 0 && l[kl] == ':' && l[kl + 1] == ' ' &&
            all_digits(l + kl + 2, ll - kl - 2)) {
            uint64_t v = 0;
            for (size_t i = kl + 2; i < ll; i++)
                v = v * 10 + (uint64_t)(l[i] - '0');
            *out = v;
            return true;
        }
        pos += ll + 1;
    }
    return false;
}

bool bqf_yaml_item(const char *body, size_t len, size_t index, const char **item, size_t *item_len)
{
    size_t pos = 0;
    while (pos < len) {
        const char *nl = memchr(body + pos, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - (body + pos)) : len - pos;
        const char *l = body + pos;
        if (ll >= 2 && l[0] == '-' && l[1] == ' ' && index-- == 0) {
            *item = l + 2;
            *item_len = ll - 2;
            return true;
        }
        pos += ll + 1;
    }
    return false;
}
