/* result_files.c — the files an execution left in /work/out, as an MCP
 * client receives them in the execute_code result.
 *
 * In tar order, each file is one of:
 *   image    PNG, JPEG, GIF, WebP (known by their first bytes): an
 *            `image` content item, base64, so the model sees the chart
 *            (the model APIs take these four and nothing else);
 *   inline   UTF-8 text of at most HUTCH_MCP_INLINE_TEXT_MAX: an embedded
 *            text resource (file:///work/out/PATH);
 *   link     anything else, and an image or text over what still fits
 *            inline (HUTCH_MCP_MAX_FILES_OUT_BYTES per result): a resource_link to
 *            a copy kept in the store (resources.c), read with
 *            resources/read until it expires;
 *            An SVG is never an image: a passive one (svg.h judges it) is
 *            a link, said so; one with anything active in it is dropped;
 *   dropped  over HUTCH_MCP_LINK_MAX_FILE, past HUTCH_MCP_MAX_FILE_ITEMS
 *            files, or when the store cannot keep it: no item, the reason
 *            in the text.
 * The text names every file and how it came, so a model never loses one
 * without a word; structuredContent.files says the same per file.
 *
 * Not here: the tar's rules (archive.c judges it before anything reads
 * it), keeping linked files (resources.c), the rest of the result
 * (mcp_server.c).  No state; safe from any thread. */
#include "result_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "caps.h"
#include "hutch_archive.h"
#include "log.h"
#include "svg.h"
#include "util.h"
#include "wire.h"

const char *hutch_result_mime(const char *path, const void *data, size_t size)
{
    static const struct {
        const char *ext, *mime;
    } map[] = {{".txt", "text/plain"},       {".md", "text/markdown"},
               {".csv", "text/csv"},         {".json", "application/json"},
               {".html", "text/html"},       {".xml", "application/xml"},
               {".py", "text/x-python"},     {".js", "text/javascript"},
               {".png", "image/png"},        {".jpg", "image/jpeg"},
               {".jpeg", "image/jpeg"},      {".gif", "image/gif"},
               {".webp", "image/webp"},      {".svg", "image/svg+xml"},
               {".pdf", "application/pdf"},  {".yaml", "application/yaml"},
               {".yml", "application/yaml"}, {".tsv", "text/tab-separated-values"},
               {".log", "text/plain"}};
    const unsigned char *b = data;
    const char *dot =
        strrchr(path, '/') ? strrchr(strrchr(path, '/'), '.') : strrchr(path, '.');

    /* The bytes decide for raster images: a chart saved as "plot" or
     * "plot.dat" is still shown, and a ".png" that is not one is not. */
    if (b && size >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0)
        return "image/png";
    if (b && size >= 3 && memcmp(b, "\xff\xd8\xff", 3) == 0)
        return "image/jpeg";
    if (b && size >= 6 && (memcmp(b, "GIF87a", 6) == 0 || memcmp(b, "GIF89a", 6) == 0))
        return "image/gif";
    if (b && size >= 12 && memcmp(b, "RIFF", 4) == 0 && memcmp(b + 8, "WEBP", 4) == 0)
        return "image/webp";
    for (size_t i = 0; dot && i < sizeof(map) / sizeof(map[0]); i++)
        if (strcasecmp(dot, map[i].ext) == 0) {
            /* A raster extension on other bytes says nothing true. */
            if (!strncmp(map[i].mime, "image/", 6) &&
                strcmp(map[i].mime, "image/svg+xml"))
                break;
            return map[i].mime;
        }
    return "application/octet-stream";
}

struct deliver {
    struct hutch_resources *rs;
    const char *principal;
    cJSON *items, *files;
    const struct hutch_file_list *list; /* files[i] renders list->v[i] */
    struct hutch_buf *text;
    size_t inline_total;
    int delivered;
    size_t cursor; /* the next entry of list, in tar order */
};

static int is_text(const void *data, size_t size)
{
    return data && memchr(data, '\0', size) == NULL && hutch_utf8_valid(data, size);
}

/* The entry of `files` for `path`, found in the typed list: usually the
 * next one (both are in tar order), else searched. */
static cJSON *entry_of(struct deliver *d, const char *path)
{
    const struct hutch_file_list *l = d->list;
    size_t i = d->cursor;

    if (i >= l->n || strcmp(l->v[i].path, path)) {
        for (i = 0; i < l->n && strcmp(l->v[i].path, path); i++)
            ;
        if (i == l->n)
            return NULL;
    }
    d->cursor = i + 1;
    return cJSON_GetArrayItem(d->files, (int)i);
}

static void set_str(cJSON *o, const char *k, const char *v)
{
    if (!o)
        return;
    cJSON_DeleteItemFromObjectCaseSensitive(o, k);
    cJSON_AddStringToObject(o, k, v);
}

static void dropped(struct deliver *d, cJSON *e, const char *path, size_t size,
                    const char *mime, const char *why)
{
    hutch_buf_appendf(d->text, "%s (%zu bytes, %s): not delivered: %s\n", path, size,
                      mime, why);
    set_str(e, "delivery", "dropped");
    set_str(e, "reason", why);
}

/* A resource_link to a copy in the store; dropped when it cannot be kept.
 * `why` says why it is not inline (NULL: its kind never is). */
static void link_file(struct deliver *d, cJSON *e, const char *path, const void *data,
                      size_t size, const char *mime, const char *why)
{
    char uri[HUTCH_TAR_MAX_PATH * 3 + 64], when[64];
    struct hutch_err err = HUTCH_ERR_INIT;
    time_t expires;
    struct tm tm;
    cJSON *it;

    if (!d->rs) {
        dropped(d, e, path, size, mime,
                "this server keeps no files for resources/read");
        return;
    }
    if (hutch_resources_put(d->rs, d->principal, path, mime, data, size, uri,
                            sizeof(uri), &expires, &err) < 0) {
        char msg[HUTCH_ERR_MSG + 96];
        snprintf(msg, sizeof(msg), "%s; write it to a folder the policy's paths offer",
                 err.msg);
        dropped(d, e, path, size, mime, msg);
        return;
    }
    gmtime_r(&expires, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "type", "resource_link");
    cJSON_AddStringToObject(it, "uri", uri);
    cJSON_AddStringToObject(it, "name", path);
    cJSON_AddStringToObject(it, "mimeType", mime);
    cJSON_AddNumberToObject(it, "size", (double)size);
    cJSON_AddItemToArray(d->items, it);
    d->delivered++;
    hutch_buf_appendf(d->text,
                      "%s (%zu bytes, %s): link %s (resources/read until %s%s%s)\n",
                      path, size, mime, uri, when, why ? "; " : "", why ? why : "");
    set_str(e, "delivery", "link");
    set_str(e, "uri", uri);
    set_str(e, "expires", when);
}

static int deliver_one(void *arg, const char *path, const void *data, size_t size)
{
    struct deliver *d = arg;
    cJSON *e = entry_of(d, path), *it;
    const char *mime = hutch_result_mime(path, data, size);
    int image = !strncmp(mime, "image/", 6), text = is_text(data, size);
    int fits = d->inline_total + size <= HUTCH_MCP_MAX_FILES_OUT_BYTES;
    char why[192];

    char svg_why[160];
    int svg = image && !strcmp(mime, "image/svg+xml");

    if (svg) {
        /* Never an image item (svg.h); a passive one is a link. */
        image = 0;
        if (!text)
            mime = "application/octet-stream"; /* an .svg that is not text */
        else
            switch (hutch_svg_judge(data, size, svg_why, sizeof(svg_why))) {
            case HUTCH_SVG_ACTIVE:
                snprintf(why, sizeof(why), "an SVG with active content (%.100s)",
                         svg_why);
                set_str(e, "mimeType", mime);
                dropped(d, e, path, size, mime, why);
                return 0;
            case HUTCH_SVG_NOT_SVG:
                mime = "text/plain";
                svg = 0;
                break;
            case HUTCH_SVG_PASSIVE:
                break;
            }
    }
    set_str(e, "mimeType", mime);
    if (d->delivered >= HUTCH_MCP_MAX_FILE_ITEMS) {
        snprintf(why, sizeof(why),
                 "more than %d files in one result: pack them into one archive",
                 HUTCH_MCP_MAX_FILE_ITEMS);
        dropped(d, e, path, size, mime, why);
        return 0;
    }
    if (!data) {
        snprintf(why, sizeof(why),
                 "over the %u MiB a link can carry; write it to a folder the "
                 "policy's paths offer",
                 HUTCH_MCP_LINK_MAX_FILE >> 20);
        dropped(d, e, path, size, mime, why);
        return 0;
    }
    if (image && fits) {
        char *b64 = hutch_base64_encode(data, size);
        if (b64) {
            it = cJSON_CreateObject();
            cJSON_AddStringToObject(it, "type", "image");
            cJSON_AddStringToObject(it, "data", b64);
            cJSON_AddStringToObject(it, "mimeType", mime);
            cJSON_AddItemToArray(d->items, it);
            free(b64);
            d->inline_total += size;
            d->delivered++;
            hutch_buf_appendf(d->text, "%s (%zu bytes, %s): shown as an image\n", path,
                              size, mime);
            set_str(e, "delivery", "image");
            return 0;
        }
    }
    if (svg) {
        link_file(d, e, path, data, size, mime,
                  "an SVG is not an image the model can see: save charts as PNG");
        return 0;
    }
    if (!image && text && size <= HUTCH_MCP_INLINE_TEXT_MAX && fits) {
        char uri[HUTCH_TAR_MAX_PATH + 32];
        cJSON *res;
        it = cJSON_CreateObject();
        cJSON_AddStringToObject(it, "type", "resource");
        res = cJSON_AddObjectToObject(it, "resource");
        snprintf(uri, sizeof(uri), "file:///work/out/%s", path);
        cJSON_AddStringToObject(res, "uri", uri);
        cJSON_AddStringToObject(
            res, "mimeType",
            strcmp(mime, "application/octet-stream") ? mime : "text/plain");
        cJSON_AddStringToObject(res, "text", data);
        cJSON_AddItemToArray(d->items, it);
        d->inline_total += size;
        d->delivered++;
        hutch_buf_appendf(
            d->text, "%s (%zu bytes, %s): inline as %s\n", path, size,
            strcmp(mime, "application/octet-stream") ? mime : "text/plain", uri);
        set_str(e, "delivery", "inline");
        set_str(e, "mimeType",
                strcmp(mime, "application/octet-stream") ? mime : "text/plain");
        return 0;
    }
    if ((image || (text && size <= HUTCH_MCP_INLINE_TEXT_MAX)) && !fits)
        snprintf(why, sizeof(why), "over the %u KiB of files a result carries inline",
                 HUTCH_MCP_MAX_FILES_OUT_BYTES >> 10);
    else
        why[0] = '\0';
    link_file(d, e, path, data, size, mime, why[0] ? why : NULL);
    return 0;
}

void hutch_result_files(const void *tar, size_t len, struct hutch_resources *rs,
                        const char *principal, cJSON *items,
                        const struct hutch_file_list *list, cJSON *files,
                        struct hutch_buf *text)
{
    struct deliver d = {.rs = rs,
                        .principal = principal,
                        .items = items,
                        .files = files,
                        .list = list,
                        .text = text};
    struct hutch_err err = HUTCH_ERR_INIT;

    if (!tar || !len || list->n == 0)
        return;
    hutch_buf_append(text, "--- files (in /work/out) ---\n", 29);
    if (hutch_archive_read_files(tar, len, HUTCH_MCP_LINK_MAX_FILE, deliver_one, &d,
                                 &err) < 0) {
        /* The tar was judged when it came back: this is hutch's trouble
         * (memory), said in the text so no file goes unmentioned. */
        hutch_warn("delivering result files: %s", err.msg);
        hutch_buf_appendf(text, "files not delivered: %s\n", err.msg);
    }
}
