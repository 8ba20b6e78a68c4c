/* fuzz_svg.c — the SVG judge (svg.c: hutch_svg_judge).
 *
 * Input: any bytes, judged as the text of an .svg a sandbox wrote.  A
 * refusal always says why; a passive verdict never lets a tag named
 * script, foreignObject or an event handler through outside comments (a
 * second, naive scan of the same bytes checks it). */
#include <ctype.h>
#include <strings.h>

#include "fuzz.h"
#include "svg.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

/* Whether `s` has `<word` outside comments, any case. */
static int has_tag(const char *s, size_t n, const char *word)
{
    size_t w = strlen(word);
    for (size_t i = 0; i < n; i++) {
        if (i + 4 <= n && !memcmp(s + i, "<!--", 4)) {
            const char *e = memmem(s + i + 4, n - i - 4, "-->", 3);
            if (!e)
                return 0;
            i = (size_t)(e - s) + 2;
            continue;
        }
        if (s[i] == '<' && i + 1 + w <= n && !strncasecmp(s + i + 1, word, w))
            return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[160];
    enum hutch_svg_verdict v =
        hutch_svg_judge((const char *)data, size, why, sizeof(why));

    fuzz_assert(v == HUTCH_SVG_PASSIVE || v == HUTCH_SVG_ACTIVE ||
                v == HUTCH_SVG_NOT_SVG);
    fuzz_assert(memchr(why, '\0', sizeof(why)));
    if (v != HUTCH_SVG_PASSIVE)
        fuzz_assert(why[0]);
    if (v == HUTCH_SVG_PASSIVE) {
        fuzz_assert(!has_tag((const char *)data, size, "script"));
        fuzz_assert(!has_tag((const char *)data, size, "foreignObject"));
        fuzz_assert(!has_tag((const char *)data, size, "!DOCTYPE"));
    }
    fuzz_assert(hutch_svg_judge((const char *)data, size, why, sizeof(why)) == v);
    return 0;
}
