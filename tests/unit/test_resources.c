/* test_resources.c — unit tests of src/resources.c (the store behind
 * resource_link) and src/result_files.c (how /work/out reaches a client),
 * printing TAP. */
#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "caps.h"
#include "hutch_archive.h"
#include "resources.h"
#include "result_files.h"
#include "svg.h"
#include "tap.h"

static const unsigned char png_head[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n',
                                         0,    0,   0,   13,  'I',  'H',  'D',  'R'};

static void mime(void)
{
    ok(!strcmp(hutch_result_mime("a.png", png_head, sizeof(png_head)), "image/png"),
       "PNG bytes: image/png");
    ok(!strcmp(hutch_result_mime("plot.dat", png_head, sizeof(png_head)), "image/png"),
       "PNG bytes under another name: image/png");
    ok(!strcmp(hutch_result_mime("fake.png", "text", 4), "application/octet-stream"),
       ".png holding no PNG: not an image");
    ok(!strcmp(hutch_result_mime("x.jpg", "\xff\xd8\xff\xe0", 4), "image/jpeg"),
       "JPEG");
    ok(!strcmp(hutch_result_mime("x", "GIF89a", 6), "image/gif"), "GIF");
    ok(!strcmp(hutch_result_mime("x", "RIFF\0\0\0\0WEBPVP8 ", 16), "image/webp"),
       "WebP");
    ok(!strcmp(hutch_result_mime("d/s.SVG", "<svg/>", 6), "image/svg+xml"),
       "SVG by extension, any case");
    ok(!strcmp(hutch_result_mime("dir.csv/readme", "x", 1), "application/octet-stream"),
       "the extension is the file name's, not a folder's");
    ok(!strcmp(hutch_result_mime("t.csv", "a,b", 3), "text/csv"), "CSV");
}

static void store(void)
{
    struct hutch_resources *rs = NULL;
    struct hutch_err err = HUTCH_ERR_INIT;
    char uri[4096], uri2[4096];
    time_t exp;
    cJSON *r, *l;
    unsigned char bin[3] = {0, 0xff, 'x'};

    ok(hutch_resources_new(1000, NULL, &rs, &err) == 0, "a store");
    ok(hutch_resources_put(rs, "alice", "dir/a b%.bin", "application/octet-stream", bin,
                           3, uri, sizeof(uri), &exp, &err) == 0,
       "put a binary file");
    ok(!strncmp(uri, "hutch://files/", 14) && strstr(uri, "/dir/a%20b%25.bin") &&
           strlen(uri) == 14 + 32 + strlen("/dir/a%20b%25.bin"),
       "its uri: 128 random bits, the path percent-encoded (%s)", uri);
    r = hutch_resources_read(rs, "alice", uri, &err);
    ok(r && !strcmp(
                cJSON_GetStringValue(cJSON_GetObjectItem(
                    cJSON_GetArrayItem(cJSON_GetObjectItem(r, "contents"), 0), "blob")),
                "AP94"),
       "read back as a base64 blob");
    cJSON_Delete(r);
    ok(hutch_resources_put(rs, "alice", "t.txt", "text/plain", "héllo", 6, uri2,
                           sizeof(uri2), &exp, &err) == 0,
       "put a text file");
    r = hutch_resources_read(rs, "alice", uri2, &err);
    ok(r && !strcmp(
                cJSON_GetStringValue(cJSON_GetObjectItem(
                    cJSON_GetArrayItem(cJSON_GetObjectItem(r, "contents"), 0), "text")),
                "héllo"),
       "read back as text");
    cJSON_Delete(r);
    err.code = 0;
    ok(!hutch_resources_read(rs, "bob", uri, &err) && err.code == -ENOENT &&
           strstr(err.msg, "unknown or expired"),
       "another principal's uri reads as unknown");
    l = hutch_resources_list(rs, "alice");
    ok(cJSON_GetArraySize(cJSON_GetObjectItem(l, "resources")) == 2,
       "resources/list: the principal's two files");
    cJSON_Delete(l);
    l = hutch_resources_list(rs, "bob");
    ok(cJSON_GetArraySize(cJSON_GetObjectItem(l, "resources")) == 0,
       "resources/list: none of another principal's");
    cJSON_Delete(l);
    err.code = 0;
    ok(!hutch_resources_read(rs, "alice", "hutch://files/nothing", &err) &&
           err.code == -ENOENT,
       "an unknown uri: -ENOENT");
    ok(hutch_resources_put(rs, "alice", "big", "x", bin, HUTCH_MCP_LINK_MAX_FILE + 1u,
                           uri2, sizeof(uri2), &exp, &err) == -EFBIG,
       "a file over HUTCH_MCP_LINK_MAX_FILE: -EFBIG (nothing read past its size)");
    usleep(1200 * 1000);
    err.code = 0;
    ok(!hutch_resources_read(rs, "alice", uri, &err) && err.code == -ENOENT,
       "after its time (1 s here): expired");
    hutch_resources_free(rs);

    /* The count cap: the oldest goes first. */
    ok(hutch_resources_new(0, NULL, &rs, &err) == 0 &&
           hutch_resources_ttl_ms(rs) == HUTCH_MCP_LINK_TTL_MS,
       "ttl 0: the default");
    ok(hutch_resources_put(rs, "p", "first", "x", "1", 1, uri, sizeof(uri), &exp,
                           &err) == 0,
       "the first of many");
    for (int i = 0; i < HUTCH_MCP_LINKS_MAX_COUNT; i++)
        hutch_resources_put(rs, "p", "n", "x", "1", 1, uri2, sizeof(uri2), &exp, &err);
    ok(!hutch_resources_read(rs, "p", uri, &err),
       "past the count cap: the oldest dropped");
    r = hutch_resources_read(rs, "p", uri2, &err);
    ok(r != NULL, "the newest is kept");
    cJSON_Delete(r);
    hutch_resources_free(rs);
}

static const void *tar_of(struct hutch_tar **t, size_t *len, int big)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    const void *data = NULL;
    static unsigned char blob[200000];
    char *large = big ? calloc(1, HUTCH_MCP_LINK_MAX_FILE + 1) : NULL;

    memset(blob, 7, sizeof(blob));
    hutch_tar_new(t, 64u << 20, &err);
    hutch_tar_add_bytes(*t, "chart.png", png_head, sizeof(png_head), 0644, &err);
    hutch_tar_add_bytes(*t, "notes.txt", "hello\n", 6, 0644, &err);
    hutch_tar_add_bytes(*t, "data.bin", blob, sizeof(blob), 0644, &err);
    if (large)
        hutch_tar_add_bytes(*t, "huge.bin", large, HUTCH_MCP_LINK_MAX_FILE + 1, 0644,
                            &err);
    free(large);
    hutch_tar_finish(*t, &data, len, &err);
    return data;
}

/* The listing as exec.c types it, and its JSON as result_json.c renders
 * it (one entry per file, in order). */
static struct hutch_file_list list;

static cJSON *files_of(const char *const *paths, int n)
{
    cJSON *a = cJSON_CreateArray();
    hutch_file_list_clear(&list);
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "path", paths[i]);
        cJSON_AddItemToArray(a, o);
        hutch_file_list_add(&list, paths[i], 0);
    }
    return a;
}

static const char *field(cJSON *files, int i, const char *k)
{
    return cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(files, i), k));
}

static void render(void)
{
    static const char *const paths[] = {"chart.png", "notes.txt", "data.bin",
                                        "huge.bin"};
    struct hutch_resources *rs = NULL;
    struct hutch_err err = HUTCH_ERR_INIT;
    struct hutch_tar *t = NULL;
    struct hutch_buf text = HUTCH_BUF_INIT(1 << 20);
    cJSON *items = cJSON_CreateArray(), *files = files_of(paths, 4);
    size_t len = 0;
    const void *tar = tar_of(&t, &len, 1);

    hutch_resources_new(0, NULL, &rs, &err);
    hutch_result_files(tar, len, rs, "alice", items, &list, files, &text);
    ok(cJSON_GetArraySize(items) == 3, "three items for four files (one dropped)");
    ok(!strcmp(cJSON_GetStringValue(
                   cJSON_GetObjectItem(cJSON_GetArrayItem(items, 0), "type")),
               "image") &&
           !strcmp(cJSON_GetStringValue(
                       cJSON_GetObjectItem(cJSON_GetArrayItem(items, 0), "mimeType")),
                   "image/png"),
       "the PNG: an image item");
    ok(!strcmp(cJSON_GetStringValue(
                   cJSON_GetObjectItem(cJSON_GetArrayItem(items, 1), "type")),
               "resource"),
       "the small text: an embedded resource");
    ok(!strcmp(cJSON_GetStringValue(
                   cJSON_GetObjectItem(cJSON_GetArrayItem(items, 2), "type")),
               "resource_link") &&
           cJSON_GetNumberValue(
               cJSON_GetObjectItem(cJSON_GetArrayItem(items, 2), "size")) == 200000,
       "the binary: a resource_link with its size");
    ok(!strcmp(field(files, 0, "delivery"), "image") &&
           !strcmp(field(files, 1, "delivery"), "inline") &&
           !strcmp(field(files, 2, "delivery"), "link") && field(files, 2, "uri") &&
           field(files, 2, "expires") &&
           !strcmp(field(files, 3, "delivery"), "dropped") &&
           strstr(field(files, 3, "reason"), "10 MiB"),
       "structuredContent.files says how each came");
    ok(strstr(hutch_buf_str(&text),
              "chart.png (16 bytes, image/png): shown as an image") &&
           strstr(hutch_buf_str(&text), "notes.txt (6 bytes, text/plain): inline") &&
           strstr(hutch_buf_str(&text),
                  "data.bin (200000 bytes, application/octet-stream): "
                  "link hutch://files/") &&
           strstr(hutch_buf_str(&text),
                  "huge.bin (10485761 bytes, "
                  "application/octet-stream): not delivered: over"),
       "the text names every file and how it came");
    {
        cJSON *r = hutch_resources_read(rs, "alice", field(files, 2, "uri"), &err);
        ok(r != NULL, "the link reads back");
        cJSON_Delete(r);
    }
    cJSON_Delete(items);
    cJSON_Delete(files);
    hutch_buf_free(&text);

    /* No store: a file that would be linked is dropped, saying why. */
    items = cJSON_CreateArray();
    files = files_of(paths, 3);
    hutch_tar_free(t);
    tar = tar_of(&t, &len, 0);
    hutch_result_files(tar, len, NULL, "alice", items, &list, files, &text);
    ok(cJSON_GetArraySize(items) == 2 &&
           !strcmp(field(files, 2, "delivery"), "dropped") &&
           strstr(hutch_buf_str(&text), "keeps no files"),
       "no store: the binary is dropped, with the reason");
    cJSON_Delete(items);
    cJSON_Delete(files);
    hutch_buf_free(&text);
    hutch_tar_free(t);
    hutch_resources_free(rs);
}

/* The SVG judge: what a chart library writes passes, anything active not. */
static void svg_judge(void)
{
    static const struct {
        const char *svg;
        enum hutch_svg_verdict want;
        const char *name;
    } cases[] = {
        {"<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
         "xmlns:xlink=\"http://www.w3.org/1999/xlink\"><metadata><rdf:RDF><cc:Work>"
         "<dc:title>Matplotlib v3.6.3, https://matplotlib.org/</dc:title></cc:Work>"
         "</rdf:RDF></metadata><defs><style type=\"text/css\">*{stroke-linecap: "
         "butt}</style></defs><g clip-path=\"url(#p1)\"><text>&#8722;1 &amp; "
         "2</text><use xlink:href=\"#m0\"/></g><!-- <script> in a comment --></svg>",
         HUTCH_SVG_PASSIVE, "matplotlib's shape passes"},
        {"<svg><image href=\"data:image/png;base64,iVBORw0KGgo=\"/></svg>",
         HUTCH_SVG_PASSIVE, "an embedded PNG passes"},
        {"<svg><script>alert(1)</script></svg>", HUTCH_SVG_ACTIVE, "<script>"},
        {"<svg><svg:script>alert(1)</svg:script></svg>", HUTCH_SVG_ACTIVE,
         "<svg:script>"},
        {"<svg onload=\"alert(1)\"/>", HUTCH_SVG_ACTIVE, "onload"},
        {"<svg><rect ONCLICK='x()'/></svg>", HUTCH_SVG_ACTIVE,
         "an event handler, any case"},
        {"<svg><a href=\"javascript:alert(1)\"><rect/></a></svg>", HUTCH_SVG_ACTIVE,
         "a javascript: link"},
        {"<svg><a href=\"java&#x09;scr&#105;pt:alert(1)\"><rect/></a></svg>",
         HUTCH_SVG_ACTIVE, "a javascript: link hidden in references"},
        {"<svg><use href=\"http://evil/x.svg#a\"/></svg>", HUTCH_SVG_ACTIVE,
         "an external use"},
        {"<svg><image xlink:href=\"https://evil/pixel.png\"/></svg>", HUTCH_SVG_ACTIVE,
         "an external image (a beacon)"},
        {"<svg><rect style=\"fill:url('http://evil/#a')\"/></svg>", HUTCH_SVG_ACTIVE,
         "url() outside the document"},
        {"<svg><style>@import url(#a);</style></svg>", HUTCH_SVG_ACTIVE, "@import"},
        {"<svg><style>&#64;import 'x';</style></svg>", HUTCH_SVG_ACTIVE,
         "@import hidden in a reference"},
        {"<svg><style>a{}</g>@import 'x'</style></svg>", HUTCH_SVG_ACTIVE,
         "markup inside a stylesheet"},
        {"<svg><foreignObject><p/></foreignObject></svg>", HUTCH_SVG_ACTIVE,
         "foreignObject"},
        {"<svg><set attributeName=\"href\" to=\"javascript:x\"/></svg>",
         HUTCH_SVG_ACTIVE, "an animation"},
        {"<!DOCTYPE svg [<!ENTITY a \"b\">]><svg>&a;</svg>", HUTCH_SVG_ACTIVE,
         "a DOCTYPE"},
        {"<svg><![CDATA[x]]></svg>", HUTCH_SVG_ACTIVE, "CDATA"},
        {"<svg><style><script/></style></svg>", HUTCH_SVG_ACTIVE,
         "an element inside a stylesheet (XML has no raw text)"},
        {"<?xml <script ?><svg/>", HUTCH_SVG_ACTIVE, "markup inside <?xml ?>"},
        {"<?xml-stylesheet href=\"x.css\"?><svg/>", HUTCH_SVG_ACTIVE,
         "a stylesheet processing instruction"},
        {"<svg x=1/>", HUTCH_SVG_ACTIVE, "an unquoted attribute"},
        {"<svg a=\"&bogus;\"/>", HUTCH_SVG_ACTIVE, "an unknown entity"},
        {"<svg xml:base=\"http://evil/\"><use href=\"#a\"/></svg>", HUTCH_SVG_ACTIVE,
         "xml:base"},
        {"<svg><rect", HUTCH_SVG_ACTIVE, "a tag that never closes"},
        {"<html:div/>", HUTCH_SVG_ACTIVE, "an element of another vocabulary"},
        {"just text, no markup", HUTCH_SVG_NOT_SVG, "no <svg>: not an SVG"},
    };
    char why[160];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        enum hutch_svg_verdict v =
            hutch_svg_judge(cases[i].svg, strlen(cases[i].svg), why, sizeof(why));
        ok(v == cases[i].want && (v == HUTCH_SVG_PASSIVE || why[0]), "svg: %s (%s)",
           cases[i].name, why);
    }
}

/* An SVG is never an image item: a passive one is a link, an active one
 * is dropped, saying why. */
static void svg_delivery(void)
{
    static const char *const paths[] = {"chart.svg", "evil.svg"};
    static const char good[] =
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><rect/></svg>";
    static const char bad[] = "<svg onload=\"fetch('x')\"><rect/></svg>";
    struct hutch_resources *rs = NULL;
    struct hutch_err err = HUTCH_ERR_INIT;
    struct hutch_tar *t = NULL;
    struct hutch_buf text = HUTCH_BUF_INIT(1 << 20);
    cJSON *items = cJSON_CreateArray(), *files = files_of(paths, 2);
    const void *tar = NULL;
    size_t len = 0;

    hutch_resources_new(0, NULL, &rs, &err);
    hutch_tar_new(&t, 1 << 20, &err);
    hutch_tar_add_bytes(t, "chart.svg", good, sizeof(good) - 1, 0644, &err);
    hutch_tar_add_bytes(t, "evil.svg", bad, sizeof(bad) - 1, 0644, &err);
    hutch_tar_finish(t, &tar, &len, &err);
    hutch_result_files(tar, len, rs, "alice", items, &list, files, &text);
    ok(cJSON_GetArraySize(items) == 1 &&
           !strcmp(cJSON_GetStringValue(
                       cJSON_GetObjectItem(cJSON_GetArrayItem(items, 0), "type")),
                   "resource_link"),
       "a passive SVG: one resource_link, no image item");
    ok(!strcmp(field(files, 0, "delivery"), "link") &&
           !strcmp(field(files, 1, "delivery"), "dropped") &&
           strstr(field(files, 1, "reason"), "active content"),
       "an SVG with an event handler: dropped, saying why");
    ok(strstr(hutch_buf_str(&text), "not an image the model can see") &&
           strstr(hutch_buf_str(&text), "evil.svg") &&
           strstr(hutch_buf_str(&text), "event handler"),
       "the text says both");
    cJSON_Delete(items);
    cJSON_Delete(files);
    hutch_buf_free(&text);
    hutch_tar_free(t);
    hutch_resources_free(rs);
}

static int readable(struct hutch_resources *rs, const char *principal, const char *uri)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    cJSON *r = hutch_resources_read(rs, principal, uri, &err);
    cJSON_Delete(r);
    return r != NULL;
}

static int listed(struct hutch_resources *rs, const char *principal)
{
    cJSON *l = hutch_resources_list(rs, principal);
    int n = cJSON_GetArraySize(cJSON_GetObjectItem(l, "resources"));
    cJSON_Delete(l);
    return n;
}

/* Shares of the store: one principal's flood drops its own oldest links,
 * never another principal's share (issue: 1100 links of one principal
 * dropped another's live link).  In memory by count and by bytes; on a
 * directory by bytes (a thousand puts there take a minute of fsyncs; the
 * rule is the same code path for both caps). */
static void shares(const char *dir)
{
    struct hutch_resources *rs = NULL;
    struct hutch_err err = HUTCH_ERR_INIT;
    char bob1[4096], bob2[4096], first[4096], last[4096];
    const char *where = dir ? "on a directory" : "in memory";
    int n = HUTCH_MCP_LINKS_MAX_COUNT + 100, bad = 0;
    size_t big = HUTCH_MCP_LINK_MAX_FILE;
    int nbig = (int)(HUTCH_MCP_LINKS_MAX_BYTES / big) + 4;
    char *data = calloc(1, big);
    time_t exp;

    if (!dir) {
        ok(hutch_resources_new(0, dir, &rs, &err) == 0, "a store %s", where);
        ok(hutch_resources_put(rs, "bob", "bob.txt", "text/plain", "b", 1, bob1,
                               sizeof(bob1), &exp, &err) == 0,
           "bob keeps one link");
        for (int i = 0; i < n; i++)
            bad |= hutch_resources_put(rs, "alice", "a.txt", "text/plain", "a", 1,
                                       i ? last : first, sizeof(last), &exp, &err) < 0;
        ok(!bad, "alice puts %d links", n);
        ok(readable(rs, "bob", bob1), "%s: bob's link outlives alice's flood", where);
        ok(!readable(rs, "alice", first) && readable(rs, "alice", last),
           "%s: alice's flood dropped her own oldest link, kept her newest", where);
        ok(listed(rs, "alice") == HUTCH_MCP_LINKS_MAX_COUNT - 1,
           "%s: alice uses the rest of the store (%d links)", where,
           listed(rs, "alice"));
        ok(hutch_resources_put(rs, "bob", "bob2.txt", "text/plain", "c", 1, bob2,
                               sizeof(bob2), &exp, &err) == 0 &&
               readable(rs, "bob", bob1) && readable(rs, "bob", bob2) &&
               listed(rs, "alice") == HUTCH_MCP_LINKS_MAX_COUNT - 2,
           "%s: bob's next link is made room for from alice's, the largest holder",
           where);
        hutch_resources_free(rs);
    }

    /* Bytes: 10 MiB files past the 256 MiB of the store. */
    ok(data && hutch_resources_new(0, dir, &rs, &err) == 0, "a store %s, for bytes",
       where);
    ok(hutch_resources_put(rs, "bob", "bob.bin", "application/octet-stream", data,
                           big / 2, bob1, sizeof(bob1), &exp, &err) == 0,
       "bob keeps a 5 MiB file");
    bad = 0;
    for (int i = 0; i < nbig; i++)
        bad |=
            hutch_resources_put(rs, "alice", "a.bin", "application/octet-stream", data,
                                big, i ? last : first, sizeof(last), &exp, &err) < 0;
    ok(!bad && readable(rs, "bob", bob1) && !readable(rs, "alice", first) &&
           readable(rs, "alice", last),
       "%s: %d files of 10 MiB from alice drop her oldest, not bob's file", where,
       nbig);
    ok(hutch_resources_put(rs, "bob", "bob2.bin", "application/octet-stream", data, big,
                           bob2, sizeof(bob2), &exp, &err) == 0 &&
           readable(rs, "bob", bob1) && readable(rs, "bob", bob2),
       "%s: bob's next 10 MiB are made room for from alice's", where);
    hutch_resources_free(rs);
    free(data);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

/* Two stores on one directory: two hutch replicas behind one address. */
static void shared_dir(void)
{
    struct hutch_resources *a = NULL, *b = NULL, *bad = NULL;
    struct hutch_err err = HUTCH_ERR_INIT;
    char dir[] = "/tmp/hutch-res-unit-XXXXXX", sub[64], uri[4096], uri2[4096];
    time_t exp;
    cJSON *r, *l;

    if (!mkdtemp(dir)) {
        ok(0, "a temporary directory");
        return;
    }
    snprintf(sub, sizeof(sub), "%s/store", dir);
    ok(hutch_resources_new(1000, sub, &a, &err) == 0, "a store on a directory (%s)",
       err.msg);
    ok(hutch_resources_new(1000, sub, &b, &err) == 0, "a second one on the same");
    ok(hutch_resources_put(a, "alice", "out/r.txt", "text/plain", "shared", 6, uri,
                           sizeof(uri), &exp, &err) == 0,
       "the first puts a file");
    r = hutch_resources_read(b, "alice", uri, &err);
    ok(r && !strcmp(
                cJSON_GetStringValue(cJSON_GetObjectItem(
                    cJSON_GetArrayItem(cJSON_GetObjectItem(r, "contents"), 0), "text")),
                "shared"),
       "the second reads it");
    cJSON_Delete(r);
    ok(hutch_resources_put(b, "alice", "bin", "application/octet-stream", "\0\1", 2,
                           uri2, sizeof(uri2), &exp, &err) == 0,
       "the second puts a binary file");
    r = hutch_resources_read(a, "alice", uri2, &err);
    ok(r && !strcmp(
                cJSON_GetStringValue(cJSON_GetObjectItem(
                    cJSON_GetArrayItem(cJSON_GetObjectItem(r, "contents"), 0), "blob")),
                "AAE="),
       "the first reads it, as a blob");
    cJSON_Delete(r);
    l = hutch_resources_list(a, "alice");
    ok(cJSON_GetArraySize(cJSON_GetObjectItem(l, "resources")) == 2,
       "either lists both");
    cJSON_Delete(l);
    err.code = 0;
    ok(!hutch_resources_read(b, "bob", uri, &err) && err.code == -ENOENT,
       "another principal's uri reads as unknown there too");
    err.code = 0;
    uri[20] = uri[20] == 'a' ? 'b' : 'a';
    ok(!hutch_resources_read(b, "alice", uri, &err) && err.code == -ENOENT,
       "a uri with another id: unknown");
    usleep(2100 * 1000); /* expiry has a one-second grain on disk */
    err.code = 0;
    ok(!hutch_resources_read(a, "alice", uri2, &err) && err.code == -ENOENT,
       "after its time: expired");
    hutch_resources_free(a);
    hutch_resources_free(b);

    ok(hutch_resources_new(0, "relative/dir", &bad, &err) == -EINVAL && !bad,
       "a relative directory is refused: %s", err.msg);
    chmod(sub, 0777);
    ok(hutch_resources_new(0, sub, &bad, &err) == -EPERM && !bad,
       "a directory others can write is refused: %s", err.msg);
    ok(nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0, "cleaned up");
}

static void shares_on_disk(void)
{
    char dir[] = "/tmp/hutch-res-shares-XXXXXX", sub[64];
    if (!mkdtemp(dir)) {
        ok(0, "a temporary directory");
        return;
    }
    snprintf(sub, sizeof(sub), "%s/store", dir);
    shares(sub);
    ok(nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0, "cleaned up");
}

int main(void)
{
    mime();
    store();
    render();
    svg_judge();
    svg_delivery();
    shared_dir();
    shares(NULL);
    shares_on_disk();
    hutch_file_list_clear(&list);
    return tap_done();
}
