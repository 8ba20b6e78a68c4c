/* svg.h — the one judge of an SVG a sandbox wrote (result files).
 *
 * Model APIs take PNG, JPEG, GIF and WebP images only, so an SVG never
 * goes out as an image; it may go out as a file behind a resource_link,
 * and a client may render it in a browser.  So an SVG is passed on only
 * when it is passive: no script, no event handler, no link or reference
 * outside the document except embedded raster images, nothing a renderer
 * would fetch or run.  The judge refuses rather than repairs: a program's
 * chart (matplotlib, plotly's static export, graphviz) passes as it is, and
 * anything else is not an SVG hutch needs to carry.
 *
 * What passes (svg.c has the lists): elements of SVG's static drawing
 * vocabulary (shapes, text, paint servers, clipping, masking, filters) and
 * inert metadata (rdf:, cc:, dc:, sodipodi:, inkscape:); attributes whose
 * name does not start with "on"; an href only to "#id" or to a data: URL of
 * a PNG, JPEG, GIF or WebP image; url(…) only to "#id"; no "javascript:",
 * "vbscript:", expression(), @import or -moz-binding anywhere in an
 * attribute or a <style>.  What is refused: a DOCTYPE, an entity
 * declaration or CDATA section (<!…>), a processing instruction other than
 * the XML declaration, an unquoted attribute, an unknown entity, a tag that
 * never closes.
 *
 * Pure functions; no state. */
#ifndef HUTCH_SVG_H
#define HUTCH_SVG_H

#include <stddef.h>

enum hutch_svg_verdict {
    HUTCH_SVG_PASSIVE = 0, /* an SVG document with nothing active in it */
    HUTCH_SVG_ACTIVE = 1,  /* refused: `why` names what and where */
    HUTCH_SVG_NOT_SVG = 2, /* well-formed enough, but no <svg> element */
};

/* Judges `len` bytes of UTF-8 text (the caller checked it is text).  `why`
 * (at least 128 bytes) says what was refused, with its byte offset. */
enum hutch_svg_verdict hutch_svg_judge(const char *s, size_t len, char *why,
                                       size_t why_len);

#endif
