/* svg.c — the SVG judge (see svg.h for what passes).
 *
 * A tokenizer of XML's markup, enough to see every tag, attribute and
 * stylesheet a renderer would act on; text between tags is skipped (it
 * renders as text).  Attribute values and stylesheets are checked after
 * decoding character references, lower-cased and with every byte up to
 * space removed, the forms in which a browser matches a URL scheme
 * ("java&#x09;script:" is "javascript:" to it). */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "svg.h"

/* SVG's static drawing vocabulary. */
static const char *const elements[] = {"svg",
                                       "g",
                                       "defs",
                                       "desc",
                                       "title",
                                       "metadata",
                                       "symbol",
                                       "use",
                                       "path",
                                       "rect",
                                       "circle",
                                       "ellipse",
                                       "line",
                                       "polyline",
                                       "polygon",
                                       "text",
                                       "tspan",
                                       "textPath",
                                       "clipPath",
                                       "mask",
                                       "pattern",
                                       "marker",
                                       "linearGradient",
                                       "radialGradient",
                                       "stop",
                                       "image",
                                       "style",
                                       "a",
                                       "switch",
                                       "view",
                                       "filter",
                                       "feBlend",
                                       "feColorMatrix",
                                       "feComponentTransfer",
                                       "feComposite",
                                       "feConvolveMatrix",
                                       "feDiffuseLighting",
                                       "feDisplacementMap",
                                       "feDistantLight",
                                       "feDropShadow",
                                       "feFlood",
                                       "feFuncA",
                                       "feFuncB",
                                       "feFuncG",
                                       "feFuncR",
                                       "feGaussianBlur",
                                       "feImage",
                                       "feMerge",
                                       "feMergeNode",
                                       "feMorphology",
                                       "feOffset",
                                       "fePointLight",
                                       "feSpecularLighting",
                                       "feSpotLight",
                                       "feTile",
                                       "feTurbulence",
                                       NULL};

/* Prefixes of metadata renderers ignore (matplotlib writes rdf:, cc:, dc:;
 * Inkscape its own). */
static const char *const inert[] = {"rdf", "cc", "dc", "sodipodi", "inkscape", NULL};

/* Found anywhere in a normalised value or stylesheet: refused. */
static const char *const active[] = {
    "javascript:",  "vbscript:", "livescript:", "expression(", "@import",
    "-moz-binding", "behavior:", "data:text/",  NULL};

/* An href may point at these data: images, or at "#id". */
static const char *const images[] = {"data:image/png", "data:image/jpeg",
                                     "data:image/gif", "data:image/webp", NULL};

struct judge {
    const char *s;
    size_t len, i;
    char *why;
    size_t why_len;
};

static enum hutch_svg_verdict refuse(struct judge *j, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum hutch_svg_verdict refuse(struct judge *j, size_t at, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(j->why, j->why_len, "at byte %zu: ", at);
    if (n < 0 || (size_t)n >= j->why_len)
        return HUTCH_SVG_ACTIVE;
    va_start(ap, fmt);
    vsnprintf(j->why + n, j->why_len - (size_t)n, fmt, ap);
    va_end(ap);
    return HUTCH_SVG_ACTIVE;
}

static int starts(const struct judge *j, size_t at, const char *lit)
{
    size_t n = strlen(lit);
    return at + n <= j->len && memcmp(j->s + at, lit, n) == 0;
}

static int in_list(const char *const *list, const char *s, size_t n)
{
    for (; *list; list++)
        if (strlen(*list) == n && memcmp(*list, s, n) == 0)
            return 1;
    return 0;
}

static int name_char(unsigned char c, int first)
{
    return isalpha(c) || c == '_' || c == ':' || c >= 0x80 ||
           (!first && (isdigit(c) || c == '-' || c == '.'));
}

static void skip_space(struct judge *j)
{
    while (j->i < j->len && (j->s[j->i] == ' ' || j->s[j->i] == '\t' ||
                             j->s[j->i] == '\n' || j->s[j->i] == '\r'))
        j->i++;
}

/* A name at j->i: its length (0: none). */
static size_t name_at(struct judge *j)
{
    size_t n = 0;
    while (j->i + n < j->len && name_char((unsigned char)j->s[j->i + n], n == 0))
        n++;
    return n;
}

/* Decodes s[0..n) (character references) into out, lower-cased, without
 * bytes up to space; -1 for a reference XML does not know. */
static int normalise(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned long c = (unsigned char)s[i];
        if (c == '&') {
            const char *semi = memchr(s + i, ';', n - i);
            size_t k;
            if (!semi)
                return -1;
            k = (size_t)(semi - (s + i)) - 1; /* between & and ; */
            if (k >= 2 && s[i + 1] == '#') {
                char num[16], *end;
                int hex = s[i + 2] == 'x' || s[i + 2] == 'X';
                size_t d = k - 1 - (size_t)hex;
                if (d == 0 || d >= sizeof(num))
                    return -1;
                memcpy(num, s + i + 2 + hex, d);
                num[d] = '\0';
                c = strtoul(num, &end, hex ? 16 : 10);
                if (*end || !isxdigit((unsigned char)num[0]))
                    return -1;
            } else if (k == 3 && !memcmp(s + i + 1, "amp", 3)) {
                c = '&';
            } else if (k == 2 && !memcmp(s + i + 1, "lt", 2)) {
                c = '<';
            } else if (k == 2 && !memcmp(s + i + 1, "gt", 2)) {
                c = '>';
            } else if (k == 4 && !memcmp(s + i + 1, "quot", 4)) {
                c = '"';
            } else if (k == 4 && !memcmp(s + i + 1, "apos", 4)) {
                c = '\'';
            } else {
                return -1;
            }
            i += k + 1;
        }
        if (c <= 0x20)
            continue;
        out[o++] = c < 0x80 ? (char)tolower((int)c) : '?';
    }
    out[o] = '\0';
    return 0;
}

/* The checks every attribute value and stylesheet passes. */
static enum hutch_svg_verdict check_text(struct judge *j, size_t at, const char *what,
                                         const char *s, size_t n, int href)
{
    char *v = malloc(n + 1), *u;
    enum hutch_svg_verdict r = HUTCH_SVG_PASSIVE;

    if (!v)
        return refuse(j, at, "out of memory");
    if (normalise(s, n, v) < 0) {
        free(v);
        return refuse(j, at, "%s holds a character reference XML does not define",
                      what);
    }
    for (const char *const *a = active; *a && !r; a++)
        if (strstr(v, *a))
            r = refuse(j, at, "%s holds \"%s\"", what, *a);
    for (u = v; !r && (u = strstr(u, "url(")); u += 4) {
        const char *t = u + 4;
        if (*t == '\'' || *t == '"')
            t++;
        if (*t != '#')
            r = refuse(j, at,
                       "%s refers outside the document (url(…) to other than #id)",
                       what);
    }
    if (!r && href && v[0] != '#') {
        int ok = 0;
        for (const char *const *im = images; *im && !ok; im++) {
            size_t k = strlen(*im);
            ok = !strncmp(v, *im, k) && (v[k] == ';' || v[k] == ',');
        }
        if (!ok)
            r = refuse(j, at,
                       "%s links to other than #id or an embedded PNG, JPEG, GIF or "
                       "WebP image",
                       what);
    }
    free(v);
    return r;
}

/* The attributes of a start tag, up to and including its '>'; *empty: it
 * ended with "/>". */
static enum hutch_svg_verdict attributes(struct judge *j, int *empty)
{
    for (;;) {
        size_t n, ln, at, vstart;
        char q, what[96];
        const char *name, *local, *colon;
        enum hutch_svg_verdict r;

        skip_space(j);
        if (j->i >= j->len)
            return refuse(j, j->i, "a tag that never closes");
        if (j->s[j->i] == '>') {
            j->i++;
            *empty = 0;
            return HUTCH_SVG_PASSIVE;
        }
        if (starts(j, j->i, "/>")) {
            j->i += 2;
            *empty = 1;
            return HUTCH_SVG_PASSIVE;
        }
        at = j->i;
        n = name_at(j);
        if (!n)
            return refuse(j, at, "a tag with a malformed attribute");
        name = j->s + j->i;
        colon = memchr(name, ':', n);
        local = colon ? colon + 1 : name;
        snprintf(what, sizeof(what), "attribute %.*s", (int)(n < 64 ? n : 64), name);
        ln = n - (size_t)(local - name);
        if (ln >= 2 && strncasecmp(local, "on", 2) == 0)
            return refuse(j, at, "%s is an event handler", what);
        if (n == 8 && !memcmp(name, "xml:base", 8))
            return refuse(j, at, "%s changes where references point", what);
        j->i += n;
        skip_space(j);
        if (j->i >= j->len || j->s[j->i] != '=')
            return refuse(j, at, "%s has no value", what);
        j->i++;
        skip_space(j);
        if (j->i >= j->len || (j->s[j->i] != '"' && j->s[j->i] != '\''))
            return refuse(j, at, "%s is not quoted", what);
        q = j->s[j->i++];
        vstart = j->i;
        while (j->i < j->len && j->s[j->i] != q) {
            if (j->s[j->i] == '<')
                return refuse(j, j->i, "%s holds a '<'", what);
            j->i++;
        }
        if (j->i >= j->len)
            return refuse(j, at, "%s never ends", what);
        r = check_text(j, at, what, j->s + vstart, j->i - vstart,
                       (ln == 4 && strncasecmp(local, "href", 4) == 0) ||
                           (ln == 3 && strncasecmp(local, "src", 3) == 0));
        if (r)
            return r;
        j->i++; /* the closing quote */
    }
}

/* A stylesheet: the text of <style> up to its end tag. */
static enum hutch_svg_verdict stylesheet(struct judge *j)
{
    const char *end = memmem(j->s + j->i, j->len - j->i, "</", 2);
    const char *lt;
    size_t at = j->i, n;
    enum hutch_svg_verdict r;

    if (!end)
        return refuse(j, at, "a <style> that never ends");
    n = (size_t)(end - (j->s + j->i));
    /* XML has no raw-text elements: a '<' in here starts a child element
     * (<style><script/></style> would be a script). */
    if ((lt = memchr(j->s + j->i, '<', n)))
        return refuse(j, (size_t)(lt - j->s), "a <style> holding markup");
    r = check_text(j, at, "a <style>", j->s + j->i, n, 0);
    j->i += n;
    /* Markup inside a stylesheet would let what follows it escape this
     * check: the first end tag must be the stylesheet's own. */
    if (!r && !starts(j, j->i, "</style") && !starts(j, j->i, "</svg:style"))
        r = refuse(j, j->i, "a <style> holding markup");
    return r;
}

enum hutch_svg_verdict hutch_svg_judge(const char *s, size_t len, char *why,
                                       size_t why_len)
{
    struct judge j = {s, len, 0, why, why_len};
    int saw_svg = 0;

    if (why_len)
        why[0] = '\0';
    while (j.i < len) {
        size_t at = j.i, n;
        const char *name, *colon, *local;
        int empty = 0, closing, svg_prefix;
        enum hutch_svg_verdict r;

        if (s[j.i] != '<') {
            j.i++;
            continue;
        }
        if (starts(&j, at, "<!--")) {
            const char *e = memmem(s + at + 4, len - at - 4, "-->", 3);
            if (!e)
                return refuse(&j, at, "a comment that never ends");
            j.i = (size_t)(e - s) + 3;
            continue;
        }
        if (starts(&j, at, "<!"))
            return refuse(&j, at, "a DOCTYPE, entity declaration or CDATA section");
        if (starts(&j, at, "<?")) {
            const char *e = memmem(s + at + 2, len - at - 2, "?>", 2);
            if (!e)
                return refuse(&j, at, "a processing instruction that never ends");
            if (!starts(&j, at, "<?xml") || at + 5 >= len ||
                !strchr(" \t\r\n", s[at + 5]))
                return refuse(&j, at, "a processing instruction other than <?xml …?>");
            if (memchr(s + at + 2, '<', (size_t)(e - s) - at - 2))
                return refuse(&j, at, "an <?xml …?> declaration holding a '<'");
            j.i = (size_t)(e - s) + 2;
            continue;
        }
        closing = j.i + 1 < len && s[j.i + 1] == '/';
        j.i += 1 + (size_t)closing;
        n = name_at(&j);
        if (!n)
            return refuse(&j, at, "a '<' that starts no tag");
        name = s + j.i;
        colon = memchr(name, ':', n);
        local = colon ? colon + 1 : name;
        svg_prefix = colon && colon - name == 3 && !memcmp(name, "svg", 3);
        j.i += n;
        if (colon && !svg_prefix && !in_list(inert, name, (size_t)(colon - name)))
            return refuse(&j, at, "element %.*s is not SVG", (int)(n < 64 ? n : 64),
                          name);
        if ((!colon || svg_prefix) &&
            !in_list(elements, local, n - (size_t)(local - name)))
            return refuse(&j, at, "element %.*s is not passed on (only static drawing)",
                          (int)(n < 64 ? n : 64), name);
        if (closing) {
            skip_space(&j);
            if (j.i >= len || s[j.i] != '>')
                return refuse(&j, at, "a malformed end tag");
            j.i++;
            continue;
        }
        if (n - (size_t)(local - name) == 3 && !memcmp(local, "svg", 3))
            saw_svg = 1;
        r = attributes(&j, &empty);
        if (r)
            return r;
        if (!empty && n - (size_t)(local - name) == 5 && !memcmp(local, "style", 5) &&
            (r = stylesheet(&j)))
            return r;
    }
    if (!saw_svg) {
        snprintf(why, why_len, "no <svg> element");
        return HUTCH_SVG_NOT_SVG;
    }
    return HUTCH_SVG_PASSIVE;
}
