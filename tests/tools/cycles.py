#!/usr/bin/python3
"""The file dependency graph of src/ and plugins/, and its cycles.

A file A depends on a file B when A's object uses a global symbol that B's
object defines, within one link: the objects of a program or a library the
build makes, then the convenience libraries it links (hutch links
libhutch.la, which links src/libhutchutil.la; the plugins link
plugins/common's).  The graph is read from the build itself: the objects of each
shipped target come from the generated Makefile (its X_OBJECTS and
X_LDADD/X_LIBADD variables, asked of GNU make), the symbols from `nm` on the
objects (for a libtool object, its PIC object).  Symbols no object of the
link defines come from libraries and are ignored.  The test programs'
targets (tests_*) are left out: the graph is of what hutch ships (the
binary, its library, the plugins, hutch-init).  Headers do not appear: a
type or a macro is not an arrow; a call, or a use of data, is.

Every strongly connected component of more than one file is a cycle: it is
printed with the arrows inside it and the symbols that tie each arrow.

  make check TESTS=tests/tools/cycles.py    (TAP: `not ok` when a cycle exists)
  tests/tools/cycles.py [--arrows] [BUILDDIR]   (by hand, from the build tree;
                                                  --arrows prints the whole graph)

BUILDDIR defaults to $HUTCH_BUILDDIR, else the current directory; the
source tree is $HUTCH_SRCDIR, else the one this script is in.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_DIRS = ('src/', 'plugins/')
# Asks the generated Makefile for its targets' objects and what they link.
MAKE_QUERY = (
    'cycles-vars:\n'
    '\t@$(foreach v,$(filter-out am_%,$(filter %_OBJECTS,$(.VARIABLES))),'
    'echo "O $(v:_OBJECTS=) $($(v))";'
    'echo "L $(v:_OBJECTS=) $($(v:_OBJECTS=_LDADD)) $($(v:_OBJECTS=_LIBADD))";)\n')


class Failure(Exception):
    pass


def canonical(name):
    return re.sub(r'[^A-Za-z0-9_]', '_', name)


def targets(builddir):
    """{target: ([object, ...], [linked convenience target, ...])}"""
    env = dict(os.environ, MAKEFLAGS='', MFLAGS='', MAKELEVEL='')
    try:
        out = subprocess.run(
            ['make', '-s', '--no-print-directory', '-C', builddir, '-f', 'Makefile',
             '-f', '-', 'cycles-vars'], input=MAKE_QUERY, capture_output=True,
            text=True, env=env, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Failure('cannot ask make for the objects: %s' % e)
    if out.returncode != 0:
        raise Failure('make in %s: %s' % (builddir, out.stderr.strip()[:400]))
    objs, links = {}, {}
    for line in out.stdout.splitlines():
        kind, _, rest = line.partition(' ')
        name, _, words = rest.partition(' ')
        if kind == 'O':
            objs[name] = words.split()
        elif kind == 'L':
            links[name] = [canonical(w) for w in words.split() if w.endswith('.la')]
    def linked(t, seen):
        # What t links, and what those link in turn (libhutch.la links
        # src/libhutchutil.la), each once, nearest first.
        out = []
        for l in links.get(t, []):
            if l in objs and l not in seen:
                seen.add(l)
                out.append(l)
        for l in list(out):
            out += linked(l, seen)
        return out
    return {t: (o, linked(t, {t}))
            for t, o in objs.items() if not t.startswith('tests_')}


def source_of(obj, srcdir):
    """src/libhutch_la-metrics.lo -> src/metrics.c (automake's subdir-objects:
    the object sits in its source's directory, named TARGET-BASE or BASE)."""
    d, base = os.path.split(obj)
    stem = os.path.splitext(base)[0]
    if '-' in stem:
        stem = stem.split('-', 1)[1]
    src = os.path.join(d, stem + '.c')
    return src if os.path.exists(os.path.join(srcdir, src)) else None


def object_file(obj, builddir):
    """The file nm reads: a libtool object's PIC (else non-PIC) object."""
    path = os.path.join(builddir, obj)
    if not obj.endswith('.lo'):
        return path
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        raise Failure('%s is missing: build first (make)' % obj)
    for key in ('pic_object', 'non_pic_object'):
        m = re.search(r"^%s='([^']*)'" % key, text, re.M)
        if m and m.group(1) != 'none':
            return os.path.join(os.path.dirname(path), m.group(1))
    raise Failure('%s names no object' % obj)


def symbols(paths):
    """{path: (defined, used)} from one nm run."""
    try:
        out = subprocess.run(['nm', '-P', '-A'] + paths, capture_output=True, text=True,
                             timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Failure('nm: %s' % e)
    if out.returncode != 0:
        raise Failure('nm: %s' % out.stderr.strip()[:400])
    syms = {p: (set(), set()) for p in paths}
    for line in out.stdout.splitlines():
        # "path: name type [value size]"
        head, sep, rest = line.partition(': ')
        if not sep or head not in syms:
            continue
        fields = rest.split()
        if len(fields) < 2:
            continue
        name, kind = fields[0], fields[1]
        if kind in ('U', 'w', 'v'):
            syms[head][1].add(name)
        elif kind.isupper():
            syms[head][0].add(name)
    return syms


def graph(builddir, srcdir):
    """{(A, B): {symbol, ...}} over the files of src/ and plugins/."""
    tgts = targets(builddir)
    if not any(t == 'libhutch_la' for t in tgts):
        raise Failure('%s/Makefile has no libhutch_la target: not hutch\'s build tree'
                      % builddir)
    files = {}  # object -> (source, nm path)
    for objs, _ in tgts.values():
        for o in objs:
            if o in files or not o.startswith(NODE_DIRS):
                continue
            src = source_of(o, srcdir)
            if src is None:
                raise Failure('no source in %s for object %s' % (srcdir, o))
            files[o] = (src, object_file(o, builddir))
    missing = [p for _, p in files.values() if not os.path.exists(p)]
    if missing:
        raise Failure('%d objects missing (%s...): build first (make)'
                      % (len(missing), missing[0]))
    syms = symbols(sorted({p for _, p in files.values()}))
    arrows = {}
    for t, (objs, linked) in tgts.items():
        mine = [o for o in objs if o in files]
        if not mine:
            continue
        # Where a symbol resolves: this target's objects, then what it links.
        scopes = [[o for o in objs if o in files]] + [
            [o for o in tgts[l][0] if o in files] for l in linked]
        where = []
        for scope in scopes:
            defs = {}
            for o in scope:
                for s in syms[files[o][1]][0]:
                    defs.setdefault(s, set()).add(files[o][0])
            where.append(defs)
        for o in mine:
            a = files[o][0]
            for s in syms[files[o][1]][1]:
                for defs in where:
                    if s in defs:
                        for b in defs[s]:
                            if b != a:
                                arrows.setdefault((a, b), set()).add(s)
                        break
    nodes = {src for src, _ in files.values()}
    return nodes, arrows


def components(nodes, arrows):
    """Tarjan's strongly connected components, each sorted, largest first."""
    succ = {n: [] for n in nodes}
    for a, b in arrows:
        succ[a].append(b)
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(succ[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            n, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                    break
                if w in on:
                    low[n] = min(low[n], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[n])
                if low[n] == index[n]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == n:
                            break
                    out.append(sorted(comp))

    for n in sorted(nodes):
        if n not in index:
            visit(n)
    return sorted((c for c in out if len(c) > 1), key=lambda c: (-len(c), c))


def describe(comp, arrows):
    lines = ['cycle of %d files: %s' % (len(comp), ' '.join(comp))]
    inside = set(comp)
    for (a, b), s in sorted(arrows.items()):
        if a in inside and b in inside:
            lines.append('  %s -> %s: %s' % (a, b, ', '.join(sorted(s))))
    return lines


def main(argv):
    args = [a for a in argv[1:] if not a.startswith('--')]
    show_arrows = '--arrows' in argv[1:]
    unknown = [a for a in argv[1:] if a.startswith('--') and a != '--arrows']
    if unknown or len(args) > 1:
        sys.stderr.write('usage: cycles.py [--arrows] [BUILDDIR]\n')
        return 2
    builddir = args[0] if args else os.environ.get('HUTCH_BUILDDIR') or os.getcwd()
    srcdir = os.environ.get('HUTCH_SRCDIR') or os.path.normpath(os.path.join(HERE, '..', '..'))
    print('1..1')
    try:
        nodes, arrows = graph(builddir, srcdir)
    except Failure as e:
        print('not ok 1 - the dependency graph of src/ and plugins/: %s' % e)
        return 1
    if show_arrows:
        for (a, b), s in sorted(arrows.items()):
            print('# %s -> %s: %s' % (a, b, ', '.join(sorted(s))))
    comps = components(nodes, arrows)
    what = '%d files of src/ and plugins/, %d arrows' % (len(nodes), len(arrows))
    if not comps:
        print('ok 1 - no cycle among the %s' % what)
        return 0
    print('not ok 1 - %d cycles among the %s' % (len(comps), what))
    for c in comps:
        for line in describe(c, arrows):
            print('# ' + line)
    return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))
