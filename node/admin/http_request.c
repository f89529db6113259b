/* The admin API's HTTP/1.1 request parser (see http_request.h). Bytes are
 * taken one at a time into the current line; each complete line is checked
 * whole: the request line (method, origin-form target, version), then the
 * header lines, of which only Host, Content-Length, Transfer-Encoding and
 * Connection mean something here. The limits, and bytes that no line may
 * hold (controls; anything but printable ASCII in a request line), are
 * checked as bytes arrive, so an oversized line or a TLS handshake sent to
 * the plaintext port is refused before a line end is seen.
 *
 * Strictness follows RFC 9112 where it costs nothing: single spaces in the
 * request line, no whitespace before a header's colon, no obsolete line
 * folding, no control characters, a CR only before LF, one Host at most
 * (required in HTTP/1.1). A bare LF ends a line, as section 2.2 allows, and
 * empty lines before a request line are skipped. */
#include "node/admin/http_request.h"

#include <string.h>

enum { ST_START, ST_HEADERS, ST_DONE, ST_ERROR };

static void reset(bq_http_parser_t *p)
{
    p->req = (bq_http_request_t){.method = BQ_HTTP_OTHER, .path = "", .query = ""};
    p->status = 0;
    p->why = NULL;
    p->state = ST_START;
    p->cr = false;
    p->line_len = p->skipped = p->header_bytes = 0;
    p->fields = 0;
    p->host = p->close = p->keep_alive = false;
    p->target[0] = '\0';
}

void bq_http_parser_init(bq_http_parser_t *p)
{
    reset(p);
}

bool bq_http_parser_idle(const bq_http_parser_t *p)
{
    return p->state == ST_DONE ||
           (p->state == ST_START && p->line_len == 0 && p->skipped == 0 && !p->cr);
}

static bq_http_result_t refuse(bq_http_parser_t *p, int status, const char *why)
{
    p->state = ST_ERROR;
    p->status = status;
    p->why = why;
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

/* Checks the target t[0..n) and copies it to p->target, split at the first
 * '?' into path and query. */
static bq_http_result_t take_target(bq_http_parser_t *p, const char *t, size_t n)
{
    if (t[0] != '/')
        return refuse(p, 400, "request target is not an absolute path");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c == '%' ? hexpair(t + i + 1, n - i - 1) < 0 : !is_target_char(c))
            return refuse(p, 400, "malformed request target");
    }
    memcpy(p->target, t, n);
    p->target[n] = '\0';
    char *q = strchr(p->target, '?');
    p->req.path = p->target;
    p->req.query = "";
    if (q != NULL) {
        *q = '\0';
        p->req.query = q + 1;
    }
    return BQ_HTTP_MORE;
}

/* "METHOD SP target SP HTTP/d.d" from p->line. */
static bq_http_result_t request_line(bq_http_parser_t *p)
{
    const char *s = p->line;
    size_t n = p->line_len;
    const char *sp1 = memchr(s, ' ', n);
    if (sp1 == NULL || sp1 == s)
        return refuse(p, 400, "malformed request line");
    size_t mlen = (size_t)(sp1 - s);
    for (size_t i = 0; i < mlen; i++)
        if (!is_tchar((unsigned char)s[i]))
            return refuse(p, 400, "malformed method");
    const char *t = sp1 + 1;
    const char *sp2 = memchr(t, ' ', n - mlen - 1);
    if (sp2 == NULL || sp2 == t)
        return refuse(p, 400, "malformed request line");
    const char *v = sp2 + 1;
    size_t vlen = n - (size_t)(v - s);
    if (vlen != 8 || memcmp(v, "HTTP/", 5) != 0 || !is_digit(v[5]) || v[6] != '.' ||
        !is_digit(v[7]))
        return refuse(p, 400, "malformed HTTP version");
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return refuse(p, 505, "HTTP version not supported");
    p->req.minor = v[7] - '0';
    if (mlen == 3 && memcmp(s, "GET", 3) == 0)
        p->req.method = BQ_HTTP_GET;
    else if (mlen == 4 && memcmp(s, "HEAD", 4) == 0)
        p->req.method = BQ_HTTP_HEAD;
    else if (mlen == 4 && memcmp(s, "POST", 4) == 0)
        p->req.method = BQ_HTTP_POST;
    else
        p->req.method = BQ_HTTP_OTHER;
    return take_target(p, t, (size_t)(sp2 - t));
}

/* The comma-separated options of a Connection header, v[0..n). */
static void connection_options(bq_http_parser_t *p, const char *v, size_t n)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t start = i;
        while (i < n && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
            i++;
        if (ieq(v + start, i - start, "close"))
            p->close = true;
        else if (ieq(v + start, i - start, "keep-alive"))
            p->keep_alive = true;
    }
}

/* Acts on the header fields that matter here; v[0..vn) is the trimmed value. */
static bq_http_result_t header_field(bq_http_parser_t *p, const char *name, size_t nn,
                                     const char *v, size_t vn)
{
    if (ieq(name, nn, "host")) {
        if (p->host)
            return refuse(p, 400, "more than one Host header");
        p->host = true;
    } else if (ieq(name, nn, "content-length")) {
        if (vn == 0)
            return refuse(p, 400, "malformed Content-Length");
        bool zero = true;
        for (size_t i = 0; i < vn; i++) {
            if (!is_digit(v[i]))
                return refuse(p, 400, "malformed Content-Length");
            zero = zero && v[i] == '0';
        }
        if (!zero)
            return refuse(p, 413, "request body not accepted");
    } else if (ieq(name, nn, "transfer-encoding")) {
        return refuse(p, 501, "Transfer-Encoding not supported");
    } else if (ieq(name, nn, "connection")) {
        connection_options(p, v, vn);
    }
    return BQ_HTTP_MORE;
}

/* "name: value" from p->line. */
static bq_http_result_t header_line(bq_http_parser_t *p)
{
    const char *s = p->line;
    size_t n = p->line_len;
    if (s[0] == ' ' || s[0] == '\t')
        return refuse(p, 400, "obsolete line folding");
    const char *colon = memchr(s, ':', n);
    if (colon == NULL || colon == s)
        return refuse(p, 400, "malformed header field");
    size_t nn = (size_t)(colon - s);
    for (size_t i = 0; i < nn; i++)
        if (!is_tchar((unsigned char)s[i]))
            return refuse(p, 400, "malformed header field name");
    const char *v = colon + 1, *end = s + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    return header_field(p, s, nn, v, (size_t)(end - v));
}

/* The empty line after the headers. */
static bq_http_result_t end_head(bq_http_parser_t *p)
{
    if (p->req.minor == 1 && !p->host)
        return refuse(p, 400, "missing Host header");
    p->req.keep_alive = !p->close && (p->req.minor == 1 || p->keep_alive);
    p->state = ST_DONE;
    return BQ_HTTP_REQUEST;
}

static bq_http_result_t end_line(bq_http_parser_t *p)
{
    bq_http_result_t r;
    if (p->state == ST_START) {
        if (p->line_len == 0) {
            p->skipped += 2;
            return p->skipped > BQ_HTTP_MAX_LINE
                       ? refuse(p, 400, "too many empty lines before the request")
                       : BQ_HTTP_MORE;
        }
        r = request_line(p);
        p->state = r == BQ_HTTP_MORE ? ST_HEADERS : p->state;
    } else if (p->line_len == 0) {
        r = end_head(p);
    } else if (++p->fields > BQ_HTTP_MAX_FIELDS) {
        r = refuse(p, 431, "too many header fields");
    } else {
        p->header_bytes += p->line_len + 2;
        r = header_line(p);
    }
    p->line_len = 0;
    return r;
}

static bq_http_result_t take(bq_http_parser_t *p, unsigned char c)
{
    if (p->cr) {
        p->cr = false;
        return c == '\n' ? end_line(p) : refuse(p, 400, "CR not followed by LF");
    }
    if (c == '\r') {
        p->cr = true;
        return BQ_HTTP_MORE;
    }
    if (c == '\n')
        return end_line(p);
    if (p->state == ST_START) {
        /* Only printable ASCII and spaces make a request line: refused at
         * once, so that a TLS handshake or binary junk gets 400 at its first
         * byte rather than a timeout. */
        if (c < 0x20 || c >= 0x7f)
            return refuse(p, 400, "malformed request line");
        if (p->line_len >= BQ_HTTP_MAX_LINE)
            return refuse(p, 414, "request line too long");
    } else {
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return refuse(p, 400, "control character in header field");
        if (p->header_bytes + p->line_len + 1 + 2 > BQ_HTTP_MAX_HEADERS)
            return refuse(p, 431, "header section too large");
    }
    p->line[p->line_len++] = (char)c;
    return BQ_HTTP_MORE;
}

bq_http_result_t bq_http_parse(bq_http_parser_t *p, const char *data, size_t len, size_t *used)
{
    *used = 0;
    if (p->state == ST_ERROR)
        return BQ_HTTP_ERROR;
    if (p->state == ST_DONE)
        reset(p);
    for (size_t i = 0; i < len; i++) {
        bq_http_result_t r = take(p, (unsigned char)data[i]);
        if (r != BQ_HTTP_MORE) {
            *used = i + 1;
            return r;
        }
    }
    *used = len;
    return BQ_HTTP_MORE;
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

static bool is_value_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

/* Percent-decodes s[0..n) into out; -1 when malformed, disallowed or too long. */
static int decode_value(const char *s, size_t n, char *out, size_t outlen)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            c = hexpair(s + i + 1, n - i - 1);
            i += 2;
        }
        if (!is_value_char(c) || k + 1 >= outlen)
            return -1;
        out[k++] = (char)c;
    }
    out[k] = '\0';
    return 0;
}

int bq_http_query_get(const char *query, const char *key, char *out, size_t outlen)
{
    int found = 0;
    if (outlen > 0)
        out[0] = '\0';
    for (const char *s = query; *s != '\0';) {
        size_t n = strcspn(s, "&");
        const char *eq = memchr(s, '=', n);
        size_t klen = eq != NULL ? (size_t)(eq - s) : n;
        if (n > 0 && key_matches(s, klen, key)) {
            if (found || outlen == 0)
                return -1;
            found = 1;
            if (decode_value(s + klen + (eq != NULL), n - klen - (eq != NULL), out, outlen) < 0)
                return -1;
        }
        s += n + (s[n] == '&');
    }
    return found;
}
