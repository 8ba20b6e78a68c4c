/* jsonc.c — JSON with comments and trailing commas read as JSON (see
 * jsonc.h).  One pass over the text, a state per byte: in a string (a
 * backslash escapes the next byte), in a line comment, in a block comment,
 * or between tokens, where a comma is held until the next byte that is not
 * blank (comments are blank by then) says whether it trailed. */
#include <errno.h>

#include "jsonc.h"

enum state { CODE, STRING, LINE, BLOCK };

static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int hutch_jsonc_strip(char *text, size_t len, unsigned *line, unsigned *col)
{
    enum state st = CODE;
    size_t i = 0, comma = 0; /* comma: its index + 1, or 0 */
    unsigned ln = 1, cl = 1, open_ln = 0, open_cl = 0;

    if (len >= 3 && (unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB &&
        (unsigned char)text[2] == 0xBF) {
        text[0] = text[1] = text[2] = ' ';
        i = 3;
        cl = 4;
    }
    for (; i < len; i++, cl++) {
        char c = text[i];
        switch (st) {
        case STRING: /* to the next unescaped quote, newlines included, as
                      * cJSON reads a string */
            if (c == '\\' && i + 1 < len) {
                i++;
                cl++;
            } else if (c == '"') {
                st = CODE;
            }
            break;
        case LINE:
            if (c == '\n')
                st = CODE;
            else
                text[i] = ' ';
            break;
        case BLOCK:
            if (c == '*' && i + 1 < len && text[i + 1] == '/') {
                text[i] = text[i + 1] = ' ';
                i++;
                cl++;
                st = CODE;
            } else if (c != '\n' && c != '\r') {
                text[i] = ' ';
            }
            break;
        case CODE:
            if (c == '/' && i + 1 < len && (text[i + 1] == '/' || text[i + 1] == '*')) {
                st = text[i + 1] == '/' ? LINE : BLOCK;
                open_ln = ln;
                open_cl = cl;
                text[i] = text[i + 1] = ' ';
                i++;
                cl++;
                break;
            }
            if (blank(c))
                break;
            if (comma && (c == ']' || c == '}'))
                text[comma - 1] = ' ';
            comma = c == ',' ? i + 1 : 0;
            if (c == '"')
                st = STRING;
            break;
        }
        if (text[i] == '\n') {
            ln++;
            cl = 0;
        }
    }
    if (st == BLOCK) {
        if (line)
            *line = open_ln;
        if (col)
            *col = open_cl;
        return -EINVAL;
    }
    return 0;
}
