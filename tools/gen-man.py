#!/usr/bin/env python3
"""Writes goro's section 3 man pages from include/goro.h.

    tools/gen-man.py include/goro.h OUTDIR VERSION

Reads goro.h and, in its order, the goro/ headers it includes at its end.
One page per family (a banner section of a header, or several), in man(7)
roff: NAME, SYNOPSIS (the declarations), DESCRIPTION (the headers' own
comments, in order), SEE ALSO. Every function and macro a page declares
gets a one-line page of its own (`.so man3/<page>.3`), so `man goro_chan_send`
finds goro_chan(3). The headers are the single source: a page never says
what they do not. Prints the names of the files written.
"""
import os
import re
import sys

# page, one-line summary, header sections (banner titles, by prefix), and
# a block filter: None (all), or (keep-if-matches: True/False, regex)
PAGES = [
    ('goro_start', 'start and shut down the goro runtime', ['Runtime'], None),
    ('goro_go', 'spawn, join, detach and name coroutines; priorities',
     ['Coroutines', 'Priorities'], None),
    ('goro_err', "error objects that travel with a coroutine's end",
     ['Error objects'], None),
    ('goro_chan', 'channels: typed queues between coroutines', ['Channels'], None),
    ('goro_select', 'wait for the first of several channel or descriptor cases',
     ['Select'], None),
    ('goro_mutex', 'mutexes, rwlocks, condition variables, semaphores, wait groups, once',
     ['Synchronisation'], None),
    ('goro_offload', 'run a blocking call on a thread pool', ['Blocking calls'], None),
    ('goro_group', 'spawn, wait, fail and cancel coroutines together; cancel causes',
     ['Groups', 'Cancellation with a cause'], None),
    ('goro_dl', 'deadline reservations: earliest deadline first, budgets, admission',
     ['Deadlines'], None),
    ('goro_wsem', 'weighted semaphores: n units at once, first come first served',
     ['Weighted semaphores'], None),
    ('goro_future', 'futures: one value or error for many waiters', ['Futures'], None),
    ('goro_flight', 'single-flight: callers of one key share one computation',
     ['Single-flight'], None),
    ('goro_pipeline', 'stages joined by bounded queues, workers moved to the bottleneck',
     ['Pipelines'], None),
    ('goro_time', 'clock, sleep, tickers, deadlines and cancellation',
     ['Time, deadlines', 'Deadlines in force'], None),
    ('goro_io', 'descriptor I/O that parks the coroutine, not the thread', ['I/O'], None),
    ('goro_preempt', 'preemption control', ['Preemption'], None),
    ('goro_net', 'listen and dial by name: Happy Eyeballs, accept back-off',
     ['Listening and dialling'], None),
    ('goro_signal', 'signals delivered to a descriptor', ['Signals'], None),
    ('goro_process', 'child processes: spawn, pipes, parked wait, kill, deadlines',
     ['Child processes'], None),
    ('goro_stream', 'buffered readers and writers, goro_copy, descriptor passing',
     ['Buffered reader', 'Buffered writer', 'Copying', 'Messages'], None),
    ('goro_debug', 'dumps, traces, stall and deadlock watches, leak reports',
     ['Debugging'], None),
    ('goro_file', 'files through io_uring or the offload pool: open, pread, fsync, sendfile',
     ['Files'], None),
]
SKIP_DIRECTIVES = ('#if', '#endif', '#else', '#elif', '#pragma', '#undef', '#include')


def headers(path):
    """[(name as included, text)]: goro.h, then each goro/ header it
    includes, in its order."""
    text = open(path).read()
    out = [('goro.h', text)]
    for sub in re.findall(r'^#include "(goro/[\w.]+\.h)"$', text, re.M):
        out.append((sub, open(os.path.join(os.path.dirname(path), sub)).read()))
    return out


def sections(text):
    """[(title, intro lines, body lines)] for each banner section of a header."""
    lines = text.split('\n')
    out, i = [], 0
    banner = re.compile(r'^/\* -{20,}$')
    while i < len(lines):
        if banner.match(lines[i]):
            j = i + 1
            intro = []
            while not lines[j].startswith(' * ----'):
                intro.append(re.sub(r'^ \* ?', '', lines[j]))
                j += 1
            body_start = j + 1
            k = body_start
            while k < len(lines) and not banner.match(lines[k]):
                k += 1
            out.append((intro[0].strip(), intro, lines[body_start:k]))
            i = k
        else:
            i += 1
    return out


def blocks(body):
    """Blank-line separated blocks: (comment lines, code lines)."""
    out, cur = [], []
    for line in body + ['']:
        if line.strip() == '':
            if cur:
                out.append(cur)
            cur = []
        else:
            cur.append(line)
    result = []
    for b in out:
        comment, code, in_comment = [], [], False
        for line in b:
            s = line.strip()
            if not code and (in_comment or s.startswith('/*')):
                in_comment = not s.endswith('*/')
                # " * text" or "/* text": keep the text's own indentation
                text = re.sub(r'^\s*/\*+ ?', '', line) if s.startswith('/*') else re.sub(r'^\s*\* ?', '', line)
                comment.append(re.sub(r'\s*\*/\s*$', '', text).rstrip())
            elif not s.startswith(SKIP_DIRECTIVES) and s not in ('}', 'extern "C" {'):
                code.append(line.rstrip())
        result.append((comment, code))
    return result


def shown(code):
    """The code as a user reads it: spawn macros without their insides."""
    out, cont = [], False
    for line in code:
        if cont:
            cont = line.endswith('\\')
            continue
        m = re.match(r'#define (\w+\([^)]*\))\s+.*goro__', line)
        if m:
            out.append('#define ' + m.group(1))
            cont = line.endswith('\\')
            continue
        out.append(line)
    return out


def names(code):
    found = []
    for line in code:
        m = re.match(r'#define ((?:goro_|GORO_|go\b)\w*)\(', line)
        if m:
            found.append(m.group(1))
            continue
        if line.startswith('typedef'):
            continue
        m = re.match(r'^(?:[A-Za-z_][\w ]*[\s*]+)?\**(goro_[a-z0-9_]+)\s*\(', line)
        if m and not m.group(1).startswith('goro__'):
            found.append(m.group(1))
    return found


def esc(s):
    s = s.replace('\\', '\\e')
    if s.startswith(('.', "'")):
        s = '\\&' + s
    return s


def prose(lines):
    """Comment text: paragraphs filled, indented lines kept as they are."""
    out, para = [], []

    def flush():
        if para:
            out.append('.PP')
            out.extend(esc(p.strip()) for p in para)
            para.clear()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == '':
            flush()
        elif line.startswith('  '):
            flush()
            out.extend(['.PP', '.RS 4', '.nf'])
            while i < len(lines) and (lines[i].startswith('  ') or lines[i].strip() == ''):
                out.append(esc(lines[i][2:].rstrip()) if lines[i].strip() else '')
                i += 1
            while out[-1] == '':
                out.pop()
            out.extend(['.fi', '.RE'])
            continue
        else:
            para.append(line)
        i += 1
    flush()
    return out


def page(name, summary, picked, version, all_pages, sources):
    declared, body = [], []
    for intro, blist in picked:
        if intro:
            body.extend(prose(intro))
        for comment, code in blist:
            code = shown(code)
            declared.extend(n for n in names(code) if n not in declared)
            if code:
                body.extend(['.PP', '.nf', '.ft B'] + [esc(c) for c in code] + ['.ft R', '.fi'])
            if comment:
                text = prose(comment)
                if code:
                    body.extend(['.RS 4'] + text + ['.RE'])
                else:
                    body.extend(text)
    # the page's own name first (go() with goro_go)
    first = [n for n in ('go', name) if n in declared]
    subs = [h for h in sources if h != 'goro.h']
    head = [
        '.\\" Generated from %s by tools/gen-man.py: edit the header.'
        % ', '.join('include/' + h for h in sources),
        '.TH %s 3 "" "goro %s" "goro manual"' % (name.upper(), version),
        '.nh',
        '.ad l',
        '.SH NAME',
        esc(', '.join(first + [d for d in declared if d not in first])) + ' \\- ' + esc(summary),
        '.SH SYNOPSIS',
        '.nf',
        '.B #include <goro.h>',
        '.fi',
    ] + ([
        '.PP',
        esc('Declared in %s, which goro.h includes; it may also be included alone.'
            % ' and '.join(sources) if subs == sources else
            'Declared in %s; goro.h includes %s, which may also be included alone.'
            % (' and '.join(sources), ' and '.join(subs))),
    ] if subs else []) + [
        '.PP',
        'Link with',
        '.BR "$(pkg-config \\-\\-cflags \\-\\-libs goro)" .',
        '.SH DESCRIPTION',
        'Errors come back as negative errno values, never through',
        '.IR errno ,',
        'except where a function says otherwise.',
    ]
    see = [p for p in all_pages if p != name]
    tail = [
        '.SH SEE ALSO',
        ',\n'.join('.BR %s (3)' % p for p in see),
        '.PP',
        'The guides, installed with the library in',
        '.IR share/doc/goro/docs/ :',
        '.I api.md',
        '(the whole API),',
        '.IR io.md ,',
        '.IR structured.md ,',
        '.IR cxx.md .',
    ]
    return '\n'.join(head + body + tail) + '\n', declared


def main():
    header, outdir, version = sys.argv[1], sys.argv[2], sys.argv[3]
    secs = [(title, intro, body, name) for name, text in headers(header)
            for title, intro, body in sections(text)]
    os.makedirs(outdir, exist_ok=True)
    all_pages = [p[0] for p in PAGES]
    written = []
    for name, summary, prefixes, filt in PAGES:
        picked, sources = [], []
        for title, intro, body, source in secs:
            if not any(title.startswith(p) for p in prefixes):
                continue
            bl = blocks(body)
            if filt:
                keep, rx = filt
                bl = [b for b in bl
                      if bool(re.search(rx, '\n'.join(b[0] + b[1]))) == keep]
                intro = intro if not keep else []
            picked.append((intro, bl))
            if source not in sources:
                sources.append(source)
        if not picked:
            sys.exit('gen-man: no section of %s for %s' % (header, name))
        text, declared = page(name, summary, picked, version, all_pages, sources)
        path = os.path.join(outdir, name + '.3')
        with open(path, 'w') as f:
            f.write(text)
        written.append(path)
        for d in declared:
            if d != name:
                link = os.path.join(outdir, d + '.3')
                with open(link, 'w') as f:
                    f.write('.so man3/%s.3\n' % name)
                written.append(link)
    print('\n'.join(sorted(set(written))))


if __name__ == '__main__':
    main()
