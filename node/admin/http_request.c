/* The admin API's HTTP/1.1 request parser (see http_request.h). The bytes
 * are scanned where the caller keeps them, one at a time; each complete
 * line is checked whole: the request line (method, origin-form target,
 * version), then the header lines, of which only Host, Content-Length,
 * Transfer-Encoding and Connection mean something here. The limits, and
 * bytes that no line may hold (controls; anything but printable ASCII in a
 * request line), are checked as bytes are scanned, so an oversized line or
 * a TLS handshake sent to the plaintext port is refused before a line end
 * is seen. What the scan learnt is kept in req->scan as offsets from the
 * start of the head, so that a later call resumes where it stopped
 * (last_len) and the slices are made only once the head is complete.
 *
 * Strictness follows RFC 9112 where it costs nothing: single spaces in the
 * request line, no whitespace before a header's colon, no obsolete line
 * folding, no control characters, a CR only before LF, one Host at most
 * (required in HTTP/1.1). A bare LF ends a line, as section 2.2 allows, and
 * empty lines before a request line are skipped. */
#include "node/admin/http_request.h"

#include <string.h>
#include <strings.h>

enum { ST_START, ST_HEADERS };

/* Offsets into a head fit in 16 bits: it is at most BQ_HTTP_MAX_LINE bytes
 * of empty lines, a request line and BQ_HTTP_MAX_HEADERS bytes of headers,
 * each with its line end, and the empty line. */
_Static_assert(2 * BQ_HTTP_MAX_LINE + BQ_HTTP_MAX_HEADERS + 16 < UINT16_MAX,
               "head offsets must fit in uint16_t");

static void reset(bq_http_request_t *r)
{
    r->method = BQ_HTTP_OTHER;
    r->minor = 0;
    r->keep_alive = false;
    r->num_headers = 0;
    r->status = 0;
    r->why = NULL;
    memset(&r->scan, 0, sizeof r->scan);
    r->scan.state = ST_START;
}

static int refuse(bq_http_request_t *r, int status, const char *why)
{
    r->status = status;
    r->why = why;
    return BQ_HTTP_ERROR;
}

/* RFC 9110 tchar: the bytes of a method or a header field name. */
static bool is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* The bytes of an origin-form target other than '%': pchar, '/' and '?'. */
static bool is_target_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("-._~!$&'()*+,;=:@/?", c) != NULL);
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The byte that s[0..avail) encodes after a '%', or -1 without two hex digits. */
static int hexpair(const char *s, size_t avail)
{
    if (avail < 2 || hexval((unsigned char)s[0]) < 0 || hexval((unsigned char)s[1]) < 0)
        return -1;
    return hexval((unsigned char)s[0]) * 16 + hexval((unsigned char)s[1]);
}

/* True when s[0..n) equals the lower-case literal lit, ignoring ASCII case. */
static bool ieq(const char *s, size_t n, const char *lit)
{
    if (strlen(lit) != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        if (c != (unsigned char)lit[i])
            return false;
    }
    return true;
}

/* "METHOD SP target SP HTTP/d.d", the line buf[at..at+n). 0 or BQ_HTTP_ERROR. */
static int request_line(bq_http_request_t *r, const char *buf, size_t at, size_t n)
{
    const char *s = buf + at;
    const char *sp1 = memchr(s, ' ', n);
    if (sp1 == NULL || sp1 == s)
        return refuse(r, 400, "malformed request line");
    size_t mlen = (size_t)(sp1 - s);
    for (size_t i = 0; i < mlen; i++)
        if (!is_tchar((unsigned char)s[i]))
            return refuse(r, 400, "malformed method");
    const char *t = sp1 + 1;
    const char *sp2 = memchr(t, ' ', n - mlen - 1);
    if (sp2 == NULL || sp2 == t)
        return refuse(r, 400, "malformed request line");
    const char *v = sp2 + 1;
    size_t vlen = n - (size_t)(v - s);
    if (vlen != 8 || memcmp(v, "HTTP/", 5) != 0 || !is_digit(v[5]) || v[6] != '.' ||
        !is_digit(v[7]))
        return refuse(r, 400, "malformed HTTP version");
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return refuse(r, 505, "HTTP version not supported");
    size_t tlen = (size_t)(sp2 - t);
    if (t[0] != '/')
        return refuse(r, 400, "request target is not an absolute path");
    for (size_t i = 0; i < tlen; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c == '%' ? hexpair(t + i + 1, tlen - i - 1) < 0 : !is_target_char(c))
            return refuse(r, 400, "malformed request target");
    }
    r->minor = v[7] - '0';
    if (mlen == 3 && memcmp(s, "GET", 3) == 0)
        r->method = BQ_HTTP_GET;
    else if (mlen == 4 && memcmp(s, "HEAD", 4) == 0)
        r->method = BQ_HTTP_HEAD;
    else if (mlen == 4 && memcmp(s, "POST", 4) == 0)
        r->method = BQ_HTTP_POST;
    else
        r->method = BQ_HTTP_OTHER;
    r->scan.request = (uint16_t)at;
    r->scan.method_len = (uint16_t)mlen;
    r->scan.target = (uint16_t)(t - buf);
    r->scan.target_len = (uint16_t)tlen;
    return 0;
}

/* The comma-separated options of a Connection header, v[0..n). */
static void connection_options(bq_http_request_t *r, const char *v, size_t n)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t start = i;
        while (i < n && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
            i++;
        if (ieq(v + start, i - start, "close"))
            r->scan.close = true;
        else if (ieq(v + start, i - start, "keep-alive"))
            r->scan.keep_alive = true;
    }
}

/* Acts on the header fields that matter here; v[0..vn) is the trimmed value. */
static int header_field(bq_http_request_t *r, const char *name, size_t nn, const char *v, size_t vn)
{
    if (ieq(name, nn, "host")) {
        if (r->scan.host)
            return refuse(r, 400, "more than one Host header");
        r->scan.host = true;
    } else if (ieq(name, nn, "content-length")) {
        if (vn == 0)
            return refuse(r, 400, "malformed Content-Length");
        bool zero = true;
        for (size_t i = 0; i < vn; i++) {
            if (!is_digit(v[i]))
                return refuse(r, 400, "malformed Content-Length");
            zero = zero && v[i] == '0';
        }
        if (!zero)
            return refuse(r, 413, "request body not accepted");
    } else if (ieq(name, nn, "transfer-encoding")) {
        return refuse(r, 501, "Transfer-Encoding not supported");
    } else if (ieq(name, nn, "connection")) {
        connection_options(r, v, vn);
    }
    return 0;
}

/* "name: value", the line buf[at..at+n), the scan's field k. 0 or BQ_HTTP_ERROR. */
static int header_line(bq_http_request_t *r, const char *buf, size_t at, size_t n, unsigned k)
{
    const char *s = buf + at;
    if (s[0] == ' ' || s[0] == '\t')
        return refuse(r, 400, "obsolete line folding");
    const char *colon = memchr(s, ':', n);
    if (colon == NULL || colon == s)
        return refuse(r, 400, "malformed header field");
    size_t nn = (size_t)(colon - s);
    for (size_t i = 0; i < nn; i++)
        if (!is_tchar((unsigned char)s[i]))
            return refuse(r, 400, "malformed header field name");
    const char *v = colon + 1, *end = s + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    uint16_t *f = r->scan.fields[k];
    f[0] = (uint16_t)at;
    f[1] = (uint16_t)nn;
    f[2] = (uint16_t)(v - buf);
    f[3] = (uint16_t)(end - v);
    return header_field(r, s, nn, v, (size_t)(end - v));
}

/* The empty line after the headers: the slices of the request in buf. */
static int end_head(bq_http_request_t *r, const char *buf)
{
    struct bq_http_scan *s = &r->scan;
    if (r->minor == 1 && !s->host)
        return refuse(r, 400, "missing Host header");
    r->keep_alive = !s->close && (r->minor == 1 || s->keep_alive);
    r->method_name = buf + s->request;
    r->method_len = s->method_len;
    r->path = buf + s->target;
    const char *q = memchr(r->path, '?', s->target_len);
    r->path_len = q != NULL ? (size_t)(q - r->path) : s->target_len;
    r->query = q != NULL ? q + 1 : r->path + s->target_len;
    r->query_len = s->target_len - r->path_len - (q != NULL);
    r->num_headers = s->nfields;
    for (unsigned k = 0; k < s->nfields; k++) {
        const uint16_t *f = s->fields[k];
        r->headers[k] = (bq_http_header_t){buf + f[0], f[1], buf + f[2], f[3]};
    }
    return (int)s->pos;
}

/* A line ended: buf[s->line..end) without its line end. 0 to go on, the
 * head's length when it is complete, or BQ_HTTP_ERROR. */
static int end_line(bq_http_request_t *r, const char *buf, size_t end)
{
    struct bq_http_scan *s = &r->scan;
    size_t at = s->line, n = end - at;
    s->line = s->pos;
    if (s->state == ST_START) {
        if (n == 0) {
            s->skipped += 2;
            return s->skipped > BQ_HTTP_MAX_LINE
                       ? refuse(r, 400, "too many empty lines before the request")
                       : 0;
        }
        int e = request_line(r, buf, at, n);
        s->state = e == 0 ? ST_HEADERS : s->state;
        return e;
    }
    if (n == 0)
        return end_head(r, buf);
    if (s->nfields >= BQ_HTTP_MAX_FIELDS)
        return refuse(r, 431, "too many header fields");
    s->header_bytes += n + 2;
    return header_line(r, buf, at, n, s->nfields++);
}

/* Scans buf[s->pos..len), byte by byte, checking each against the line it
 * is in and ending lines at LF. */
static int scan(bq_http_request_t *r, const char *buf, size_t len)
{
    struct bq_http_scan *s = &r->scan;
    while (s->pos < len) {
        unsigned char c = (unsigned char)buf[s->pos++];
        int e = 0;
        if (s->cr) {
            s->cr = false;
            e = c == '\n' ? end_line(r, buf, s->pos - 2) : refuse(r, 400, "CR not followed by LF");
        } else if (c == '\r') {
            s->cr = true;
        } else if (c == '\n') {
            e = end_line(r, buf, s->pos - 1);
        } else if (s->state == ST_START) {
            /* Only printable ASCII and spaces make a request line: refused at
             * once, so that a TLS handshake or binary junk gets 400 at its
             * first byte rather than a timeout. */
            if (c < 0x20 || c >= 0x7f)
                e = refuse(r, 400, "malformed request line");
            else if (s->pos - s->line > BQ_HTTP_MAX_LINE)
                e = refuse(r, 414, "request line too long");
        } else {
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                e = refuse(r, 400, "control character in header field");
            else if (s->header_bytes + (s->pos - s->line) + 2 > BQ_HTTP_MAX_HEADERS)
                e = refuse(r, 431, "header section too large");
        }
        if (e != 0)
            return e;
    }
    return BQ_HTTP_PARTIAL;
}

int bq_http_parse_request(const char *buf, size_t len, size_t last_len, bq_http_request_t *req)
{
    if (last_len == 0 || last_len != req->scan.pos || last_len > len)
        reset(req);
    int r = scan(req, buf, len);
    if (r != BQ_HTTP_PARTIAL)
        req->scan.pos = 0; /* done: a later call starts a new request */
    return r;
}

bool bq_http_path_is(const bq_http_request_t *req, const char *path)
{
    return strlen(path) == req->path_len && memcmp(path, req->path, req->path_len) == 0;
}

/* True when s[0..n), percent-decoded, equals key. */
static bool key_matches(const char *s, size_t n, const char *key)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            c = hexpair(s + i + 1, n - i - 1);
            if (c < 0)
                return false;
            i += 2;
        }
        if (key[k] == '\0' || (unsigned char)key[k] != c)
            return false;
        k++;
    }
    return key[k] == '\0';
}

static bool is_value_char(int c, const char *extra)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-' || (c != 0 && extra != NULL && strchr(extra, c) != NULL);
}

/* Percent-decodes s[0..n) into out; -1 when malformed, disallowed or too long. */
static int decode_value(const char *s, size_t n, char *out, size_t outlen, const char *extra)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            c = hexpair(s + i + 1, n - i - 1);
            i += 2;
        }
        if (!is_value_char(c, extra) || k + 1 >= outlen)
            return -1;
        out[k++] = (char)c;
    }
    out[k] = '\0';
    return 0;
}

/* bq_http_query_get, with the bytes of extra allowed in values too. */
static int query_get(const char *query, size_t query_len, const char *key, char *out, size_t outlen,
                     const char *extra)
{
    int found = 0;
    if (outlen > 0)
        out[0] = '\0';
    for (size_t at = 0; at < query_len;) {
        const char *s = query + at;
        const char *amp = memchr(s, '&', query_len - at);
        size_t n = amp != NULL ? (size_t)(amp - s) : query_len - at;
        const char *eq = memchr(s, '=', n);
        size_t klen = eq != NULL ? (size_t)(eq - s) : n;
        if (n > 0 && key_matches(s, klen, key)) {
            if (found || outlen == 0)
                return -1;
            found = 1;
            if (decode_value(s + klen + (eq != NULL), n - klen - (eq != NULL), out, outlen, extra) <
                0)
                return -1;
        }
        at += n + (amp != NULL);
    }
    return found;
}

int bq_http_query_get(const char *query, size_t query_len, const char *key, char *out,
                      size_t outlen)
{
    return query_get(query, query_len, key, out, outlen, NULL);
}

int bq_http_query_get_name(const char *query, size_t query_len, const char *key, char *out,
                           size_t outlen)
{
    return query_get(query, query_len, key, out, outlen, "+/;$()");
}

bool bq_http_header_get(const bq_http_request_t *req, const char *name, const char **value,
                        size_t *len)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < req->num_headers; i++) {
        const bq_http_header_t *f = &req->headers[i];
        if (f->name_len == n && strncasecmp(f->name, name, n) == 0) {
            *value = f->value;
            *len = f->value_len;
            return true;
        }
    }
    return false;
}

bool bq_http_cookie_get(const char *value, size_t len, const char *name, const char **out,
                        size_t *out_len)
{
    size_t nlen = strlen(name), i = 0;
    while (i < len) {
        while (i < len && (value[i] == ' ' || value[i] == '\t'))
            i++;
        size_t start = i;
        while (i < len && value[i] != ';')
            i++;
        size_t end = i;
        i++; /* past ';' */
        if (end - start > nlen && memcmp(value + start, name, nlen) == 0 &&
            value[start + nlen] == '=') {
            *out = value + start + nlen + 1;
            *out_len = end - start - nlen - 1;
            while (*out_len > 0 && ((*out)[*out_len - 1] == ' ' || (*out)[*out_len - 1] == '\t'))
                (*out_len)--;
            return true;
        }
    }
    return false;
}
