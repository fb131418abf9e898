#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The tables of a scripts/bench run, from its raw JSON.  Standard library
only.  Every comparison is a ratio of figures measured in the same run;
targets are checked and a miss is stated with its size, never hidden.

Two users, one renderer:
  bench/report.py DIR       (scripts/bench) DIR/raw/*.json -> DIR/results.md
                            and DIR/*.png (gnuplot)
  scripts/docs-results      the generated blocks of Documentation/performance.md,
                            from the run copied to Documentation/results/bench/:
                            the same section() and targets() output, no plots
                            drawn (the run's PNGs are copied to Documentation/perf/)
"""
import json
import math
import os
import subprocess
import sys


def busy(meta, threads):
    """True when a THREADS-thread scaling figure cannot be judged: fewer
    idle cores than threads (the 1-minute load average at the start counts
    as busy cores)."""
    try:
        cpus = int(meta.get('cpus', 0))
        load1 = float(str(meta.get('load', '')).split()[0])
    except (TypeError, ValueError, IndexError):
        return True
    return cpus - load1 < threads


def load(raw, name):
    p = os.path.join(raw, name + '.json')
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return json.load(f)


def verdict(ok, how):
    return ('met' if ok else 'MISSED') + (' (' + how + ')' if how else '')


def at_most(value, limit, how=''):
    """verdict() of value <= limit for a ratio, saying by how much it
    missed (HOW: what a met verdict adds)."""
    if value <= limit:
        return verdict(True, how)
    return verdict(False, 'by %.1f%%' % ((value / limit - 1) * 100) if value / limit < 1.5
                   else 'by %.2fx' % (value / limit))


def at_most_bytes(value, limit):
    """verdict() of value <= limit (bytes), saying by how much it missed."""
    return verdict(value <= limit, '' if value <= limit else 'by %.1f bytes' % (value - limit))


def plot(out, name, dat, script):
    """Writes the rows dat to out/NAME.dat and plots out/NAME.png with the
    gnuplot script, whose '%s' is the .dat file."""
    data = os.path.join(out, name + '.dat')
    with open(data, 'w') as f:
        f.write('\n'.join(dat) + '\n')
    return gnuplot(out, name, script % data)


def gnuplot(out, name, script):
    path = os.path.join(out, name + '.gp')
    with open(path, 'w') as f:
        f.write("set terminal pngcairo size 800,500 noenhanced\n"
                "set output '%s'\n" % os.path.join(out, name + '.png'))
        f.write(script)
    r = subprocess.run(['gnuplot', path], capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write('report: gnuplot %s failed: %s\n' % (name, r.stderr))
        return False
    return True


class Run:
    """One run's raw directory.  plot(name, dat, script) returns the path a
    page links to for the plot NAME, or None: Run draws nothing and links
    to IMG_DIR/NAME.png when that file exists (the docs); DrawingRun draws
    it with gnuplot into the run's directory (results.md)."""

    def __init__(self, raw, img_dir=None, img_prefix=''):
        self.raw = raw
        self.meta = load(raw, 'meta') or {}
        self.img_dir = img_dir
        self.img_prefix = img_prefix
        self.targets = []
        self._cache = {}

    def load(self, name):
        if name not in self._cache:
            self._cache[name] = load(self.raw, name)
        return self._cache[name]

    def plot(self, name, dat, script):
        if self.img_dir and os.path.exists(os.path.join(self.img_dir, name + '.png')):
            return self.img_prefix + name + '.png'
        return None


class DrawingRun(Run):
    def __init__(self, out):
        Run.__init__(self, os.path.join(out, 'raw'))
        self.out = out

    def plot(self, name, dat, script):
        return name + '.png' if plot(self.out, name, dat, script) else None


def mode_args(meta):
    """scripts/bench's arguments for the run's mode ("full" is none)."""
    return ' '.join(w for w in str(meta.get('mode', '')).split() if w != 'full')


def stamp(meta):
    """The run in one line: machine, kernel, commit, date and mode."""
    args = mode_args(meta)
    cpu = meta.get('cpu_model')
    host = '%s CPUs%s, Linux %s' % (meta.get('cpus', '?'), ' (%s)' % cpu if cpu else '',
                                    meta.get('host_kernel') or
                                    str(meta.get('host', '?')).split(', ')[-1])
    vm = meta.get('vm_kernel_release') or meta.get('kernel', '?')
    tcg = 'QEMU -icount, one vCPU' if 'icount' in args else 'QEMU/TCG'
    return ('Run of %s, ummunot %s, `scripts/bench%s`; host: %s, load average %s at the '
            'start; VM: kernel %s under %s (VM times are emulated: read the ratios).'
            % (meta.get('date', '?'), meta.get('commit', '?'), ' ' + args if args else '',
               host, meta.get('load', '?'), vm, tcg))


# Each section: RUN -> the lines under its heading, or None when the run has
# no data for it; the section's targets go to run.targets.

def s_cache_hit(run):
    ch = run.load('cache-hit')
    if not ch:
        return None
    meta = run.meta
    md = []
    w = md.append
    ctx = ch.get('context', {})
    med = {}
    parts = []
    for b in ch['benchmarks']:
        if b.get('aggregate_name', 'median') != 'median' and 'aggregate_name' in b:
            continue
        var = b['run_name'].split('/')[0][3:]
        if var.startswith('part_'):
            parts.append((var[5:], b['cpu_time']))
            continue
        med[(var, b['threads'])] = b
    threads = sorted({t for (_, t) in med})
    variants = ['ummunot', 'ucx_rcache', 'mutex_map']
    w('%s regions of %s bytes, random 4 KiB hits, no-op backend; libummunot over '
      'the %s.  Medians of %s repetitions, variants interleaved at random.  '
      '"ns/op" is wall time per operation of the whole process (1e9 / aggregate '
      'ops/s); "cpu ns" is CPU time per operation of one thread.\n'
      % (ctx.get('regions', '?'), ctx.get('region_len', '?'),
         ctx.get('ummunot_device', '?'), meta.get('reps', '?')))
    w('| threads | ummunot ns/op | UCX rcache ns/op | mutex+map ns/op | ummunot cpu ns '
      '| UCX cpu ns | ummunot Mops/s | UCX Mops/s | mutex+map Mops/s | ummunot/UCX ops/s |')
    w('|---|---|---|---|---|---|---|---|---|---|')
    dat = []
    for t in threads:
        row = [str(t)]
        ips = {v: med[(v, t)]['items_per_second'] for v in variants if (v, t) in med}
        for v in variants:
            row.append('%.1f' % (1e9 / ips[v]) if v in ips else '-')
        for v in variants[:2]:
            row.append('%.1f' % med[(v, t)]['cpu_time'] if (v, t) in med else '-')
        for v in variants:
            row.append('%.2f' % (ips[v] / 1e6) if v in ips else '-')
        row.append('%.2fx' % (ips['ummunot'] / ips['ucx_rcache']))
        w('| ' + ' | '.join(row) + ' |')
        dat.append('%d %s' % (t, ' '.join('%g' % (ips.get(v, 0) / 1e6) for v in variants)))
    w('')
    img = run.plot('cache-hit', dat,
                   "set title 'Cache hit (get+put): aggregate throughput'\n"
                   "set xlabel 'threads'; set ylabel 'Mops/s (higher is better)'\n"
                   "set xtics (1,2,4); set yrange [0:*]; set key left bottom; set grid\n"
                   "plot '%s' u 1:2 w lp t 'libummunot', '' u 1:3 w lp t 'UCX ucs_rcache', "
                   "'' u 1:4 w lp t 'mutex + std::map'\n")
    if img:
        w('![cache hit](%s)\n' % img)
    # Single thread: CPU time, which the other tenants of a shared host
    # disturb far less than wall time (both are in the table).
    if parts:
        w('Parts of a hit, one thread, CPU ns: ' +
          ', '.join('%s %.1f' % p for p in parts) + '.\n')
    one = {v: med[(v, 1)]['cpu_time'] for v in variants}
    r1 = one['ummunot'] / one['ucx_rcache']
    run.targets.append(('1', 'single-thread hit <= 0.5x UCX (CPU time)',
                        '%.2fx (%.1f vs %.1f ns)' % (r1, one['ummunot'], one['ucx_rcache']),
                        verdict(r1 <= 0.5, '' if r1 <= 0.5 else 'by %.1fx' % (r1 / 0.5))))
    if ('ummunot', 2) in med:
        r2 = med[('ummunot', 2)]['items_per_second'] / med[('ucx_rcache', 2)]['items_per_second']
        if busy(meta, 2):
            # Two threads that time-share busy cores measure the
            # scheduler, not the cache: refuse to judge.
            run.targets.append(('1', '2-thread aggregate >= 10x UCX', '%.2fx' % r2,
                                'not judged (%s cores, load %s)'
                                % (meta.get('cpus', '?'), meta.get('load', '?'))))
        else:
            run.targets.append(('1', '2-thread aggregate >= 10x UCX', '%.2fx' % r2,
                                verdict(r2 >= 10, '' if r2 >= 10 else 'by %.1fx' % (10 / r2))))
        grows = all(med[('ummunot', t)]['items_per_second'] >
                    1.2 * med[('ummunot', 1)]['items_per_second'] for t in threads if t > 1)
        shown = ', '.join('%d: %.2f M/s' % (t, med[('ummunot', t)]['items_per_second'] / 1e6)
                          for t in threads)
        if busy(meta, max(threads)):
            # Threads time-share busy cores: no variant can scale.
            run.targets.append(('1', 'ummunot aggregate grows with threads', shown,
                                'not judged (%s cores, load %s)'
                                % (meta.get('cpus', '?'), meta.get('load', '?'))))
        else:
            run.targets.append(('1', 'ummunot aggregate grows with threads (>1.2x)', shown,
                                verdict(grows, '')))
    return md


def s_munmap(run):
    mu = run.load('vm-munmap')
    if not mu:
        return None
    md = []
    w = md.append
    w('Median of %d round medians, each over %d munmaps per variant; variants '
      'alternate munmap by munmap.\n'
      % (mu['rounds'], mu['per_round']))
    w('| pages | monitor | munmap us | ratio to none |')
    w('|---|---|---|---|')
    for r in mu['results']:
        w('| %s | %s | %.1f | %.2fx |' % (r['pages'], r['monitor'], r['munmap_ns'] / 1e3,
                                          r['ratio_to_none']))
        if r['monitor'] == 'ummunot':
            run.targets.append(('2', 'munmap with ummunot <= 1.1x (%s)' % r['pages'],
                                '%.2fx' % r['ratio_to_none'],
                                at_most(r['ratio_to_none'], 1.1)))
    w('')
    return md


def s_scale(run):
    sc = run.load('vm-scale')
    if not sc:
        return None
    md = []
    w = md.append
    w('| regions watched | register one (us) | unregister one (us) |')
    w('|---|---|---|')
    dat = []
    for r in sc['register']:
        w('| %d | %.2f | %.2f |' % (r['regions'], r['register_ns'] / 1e3, r['unregister_ns'] / 1e3))
        dat.append('%d %g %g' % (r['regions'], r['register_ns'] / 1e3, r['unregister_ns'] / 1e3))
    w('')
    w('| regions invalidated by one munmap | munmap (us) | per region (ns) |')
    w('|---|---|---|')
    for r in sc['munmap_fanout']:
        w('| %d | %.1f | %.0f |' % (r['regions'], r['munmap_ns'] / 1e3, r['ns_per_region']))
    w('')
    img = run.plot('scale', dat,
                   "set title 'Register/unregister one region vs regions watched (VM)'\n"
                   "set logscale x; set xlabel 'regions watched'; set ylabel 'us per ioctl'\n"
                   "set yrange [0:*]; set key left top; set grid\n"
                   "plot '%s' u 1:2 w lp t 'register', '' u 1:3 w lp t 'unregister'\n")
    if img:
        w('![scale](%s)\n' % img)
    regs = sc['register']
    lo, hi = regs[0], regs[-1]
    grow = hi['register_ns'] / lo['register_ns']
    # O(log n): from n0 to n1 the cost may grow by about log(n1)/log(n0).
    allowed = math.log(hi['regions']) / math.log(lo['regions'])
    run.targets.append(('3', 'register cost O(log n) or better',
                        '%.2fx from %d to %d regions (log ratio %.1fx)'
                        % (grow, lo['regions'], hi['regions'], allowed),
                        at_most(grow, 2 * allowed, 'allowing 2x noise')))
    fo = sc['munmap_fanout']
    per = [r['ns_per_region'] for r in fo if r['regions'] >= 1000]
    if len(per) >= 2:
        run.targets.append(('3', 'munmap fan-out, per-region cost %d -> %d regions'
                            % (1000, fo[-1]['regions']),
                            '%.0f ns -> %.0f ns per region' % (per[0], per[-1]),
                            'no target (%.1fx)' % (per[-1] / per[0])))
    return md


def s_rdma(run):
    rd = run.load('vm-rdma')
    if not rd:
        return None
    md = []
    w = md.append
    w('Variants alternate message by message for about %.0f s per size (at least %d '
      'messages each); medians per message.  Every message is checked at the target '
      '(stale = the WRITE did not carry this message).  "samples" is messages per '
      'variant.\n' % (rd['budget_ns_per_size'] / 1e9, rd['min_messages']))
    w('| bytes | per-message reg (us) | ummunot cache (us) | preregistered (us) '
      '| cache / prereg | gain over per-message | stale | hits/misses | samples |')
    w('|---|---|---|---|---|---|---|---|---|')
    dat = []
    worst = 0
    for r in rd['results']:
        w('| %d | %.0f | %.0f | %.0f | %.2fx | %.2fx | %d | %d/%d | %d |'
          % (r['bytes'], r['per-message_ns'] / 1e3, r['ummunot_ns'] / 1e3,
             r['preregistered_ns'] / 1e3, r['ummunot_over_preregistered'],
             r['per_message_over_ummunot'], r['stale'], r['cache_hits'], r['cache_misses'],
             r.get('samples_per_variant', 0)))
        dat.append('%d %g %g %g' % (r['bytes'] / 1024, r['per-message_ns'] / 1e3,
                                    r['ummunot_ns'] / 1e3, r['preregistered_ns'] / 1e3))
        worst = max(worst, r['ummunot_over_preregistered'])
    w('')
    img = run.plot('rdma', dat,
                   "set title 'malloc + RDMA WRITE + free over rxe (VM, TCG)'\n"
                   "set logscale xy; set xlabel 'message KiB'; set ylabel 'us per message'\n"
                   "set key left top; set grid\n"
                   "plot '%s' u 1:2 w lp t 'register per message', '' u 1:3 w lp t 'libummunot cache', "
                   "'' u 1:4 w lp t 'preregistered (limit)'\n")
    if img:
        w('![rdma](%s)\n' % img)
    run.targets.append(('4', 'cache within 10% of preregistered at every size',
                        'worst %.2fx' % worst, at_most(worst, 1.10)))
    run.targets.append(('4', 'zero stale hits', '%d' % rd['stale_total'],
                        verdict(rd['stale_total'] == 0, '')))  # the count is the miss
    return md


def s_rdma_churn(run):
    rd = run.load('vm-rdma')
    if not rd or not rd.get('churn'):
        return None
    md = []
    w = md.append
    w('Each message\'s buffer is mmap\'d and munmap\'d, so every cache get is a '
      'miss that first processes the previous buffer\'s invalidation event: '
      'the miss + invalidation path against registering per message.\n')
    w('| bytes | per-message reg (us) | ummunot cache (us) | preregistered (us) '
      '| cache / per-message | stale | hits/misses | samples |')
    w('|---|---|---|---|---|---|---|---|')
    worst_c = 0
    for r in rd['churn']:
        c = 1 / r['per_message_over_ummunot']
        worst_c = max(worst_c, c)
        w('| %d | %.0f | %.0f | %.0f | %.2fx | %d | %d/%d | %d |'
          % (r['bytes'], r['per-message_ns'] / 1e3, r['ummunot_ns'] / 1e3,
             r['preregistered_ns'] / 1e3, c, r['stale'], r['cache_hits'],
             r['cache_misses'], r.get('samples_per_variant', 0)))
    w('')
    run.targets.append(('4b', 'churn: cache costs no more than registering per message',
                        'worst %.2fx' % worst_c, 'no target (%.2fx)' % worst_c))
    return md


def s_events(run):
    ev = run.load('vm-events')
    if not ev:
        return None
    md = []
    w = md.append
    w('| drain (events/s, %d events) | seen - munmap return, median (us) | p90 (us) '
      '| seen - munmap start, median (us) |' % ev['drain_events'])
    w('|---|---|---|---|')
    w('| %.3g | %.1f | %.1f | %.1f |' % (ev['drain_events_per_s'],
                                       ev['seen_minus_return_ns_median'] / 1e3,
                                       ev['seen_minus_return_ns_p90'] / 1e3,
                                       ev['seen_minus_start_ns_median'] / 1e3))
    w('\nNegative "seen - return": the other thread saw the generation move before '
      'munmap() had returned in the unmapping thread (the event is written inside '
      'the notifier).\n')
    return md


def s_memory(run):
    sc = run.load('vm-scale')
    sc_mem = sc['memory'] if sc else None
    cm = run.load('cache-mem-vm') or run.load('cache-mem')
    if not sc_mem and not cm:
        return None
    md = []
    w = md.append
    w('| what | bytes |')
    w('|---|---|')
    if sc_mem:
        w('| kernel, per watched region (Slab delta at %d regions) | %.1f |'
          % (sc_mem['regions'], sc_mem['slab_bytes_per_region']))
        w('| kernel, per watched region (MemAvailable delta) | %.1f |'
          % sc_mem['memavailable_bytes_per_region'])
        if 'kregion_objsize' in sc_mem:
            w('| ummunot_kregion slab object size | %d |' % sc_mem['kregion_objsize'])
        w('| ring, per entry (%d entries, header page included) | %.2f |'
          % (sc_mem['ring_entries'], sc_mem['ring_bytes_per_entry']))
        run.targets.append(('6', 'kernel <= 128 bytes per region',
                            '%.1f' % sc_mem['slab_bytes_per_region'],
                            at_most_bytes(sc_mem['slab_bytes_per_region'], 128)))
    if cm:
        w('| libummunot, per cached registration (%d entries, steady) | %.1f |'
          % (cm['entries'], cm['ummunot_bytes_per_entry']))
        w('| libummunot, per cached registration, before the grace period | %.1f |'
          % cm['ummunot_transient_bytes_per_entry'])
        w('| UCX ucs_rcache, per region | %.1f |' % cm['ucx_rcache_bytes_per_entry'])
        w('| mutex + std::map, per entry | %.1f |' % cm['mutex_map_bytes_per_entry'])
        if 'ummunot_miss_ns' in cm:
            w('| (time per miss while filling: libummunot %.0f ns, UCX %.0f ns) | |'
              % (cm['ummunot_miss_ns'], cm['ucx_miss_ns']))
        run.targets.append(('6', 'library <= 192 bytes per cached entry',
                            '%.1f' % cm['ummunot_bytes_per_entry'],
                            at_most_bytes(cm['ummunot_bytes_per_entry'], 192)))
        run.targets.append(('6', 'library: transient <= 2x steady',
                            '%.1f (%.2fx)' % (cm['ummunot_transient_bytes_per_entry'],
                                              cm['ummunot_transient_bytes_per_entry'] /
                                              cm['ummunot_bytes_per_entry']),
                            at_most(cm['ummunot_transient_bytes_per_entry'] /
                                    cm['ummunot_bytes_per_entry'], 2.0)))
    w('')
    return md


def cache_scale(name, where):
    def s(run):
        cs = run.load(name)
        if not cs:
            return None
        md = []
        w = md.append
        at = '%s, device %s' % (where, cs['device'])
        w('Both caches hold n one-page entries (no-op backend); rounds alternate between '
          'them: %d misses at fresh addresses, then %d invalidations of those entries '
          '(`ummunot_cache_invalidate` / `ucs_rcache_region_invalidate`); medians of %d '
          'rounds, CPU time of the thread.  "fill" is the mean time per miss while filling '
          'the cache from 0 to n.  Device: %s.  Load average during the run: %s.\n'
          % (cs['misses_per_round'], cs['misses_per_round'], cs['rounds'], cs['device'],
             cs['load']))
        w('| n | ummunot miss (ns) | UCX miss (ns) | miss ratio | ummunot invalidate (ns) '
          '| UCX invalidate (ns) | invalidate ratio | ummunot fill (ns) | UCX fill (ns) |')
        w('|---|---|---|---|---|---|---|---|---|')
        dat = []
        pts = cs['points']
        for p in pts:
            w('| %d | %.0f | %.0f | %.2fx | %.0f | %.0f | %.2fx | %.0f | %.0f |'
              % (p['n'], p['ummunot_miss_ns'], p['ucx_miss_ns'],
                 p['ummunot_miss_ns'] / p['ucx_miss_ns'], p['ummunot_inval_ns'],
                 p['ucx_inval_ns'], p['ummunot_inval_ns'] / p['ucx_inval_ns'],
                 p['ummunot_fill_ns'], p['ucx_fill_ns']))
            dat.append('%d %g %g %g %g' % (p['n'], p['ummunot_miss_ns'], p['ucx_miss_ns'],
                                            p['ummunot_inval_ns'], p['ucx_inval_ns']))
        w('')
        img = run.plot(name, dat,
                       "set title 'miss and invalidation cost vs cached entries (%s)'\n"
                       "set logscale xy; set xlabel 'entries in the cache (n)'; "
                       "set ylabel 'ns per operation (CPU)'\n"
                       "set key left top; set grid\n"
                       "plot '%%s' u 1:2 w lp t 'ummunot miss', '' u 1:3 w lp t 'UCX miss', "
                       "'' u 1:4 w lp t 'ummunot invalidate', '' u 1:5 w lp t 'UCX invalidate'\n"
                       % at)
        if img:
            w('![%s](%s)\n' % (name, img))
        worst = max(p['ummunot_miss_ns'] / p['ucx_miss_ns'] for p in pts)
        run.targets.append(('7', 'miss <= UCX at every n (%s)' % where,
                            'worst %.2fx' % worst,
                            verdict(worst <= 1.0, '' if worst <= 1.0 else 'by %.2fx' % worst)))
        if len(pts) >= 2:
            g = pts[-1]['ummunot_miss_ns'] / pts[0]['ummunot_miss_ns']
            span = '%d -> %d' % (pts[0]['n'], pts[-1]['n'])
            if pts[-1]['n'] >= 1000000:
                grown = at_most(g, 2.0)
            else:
                grown = 'not judged (n stopped at %d)' % pts[-1]['n']
            run.targets.append(('7', 'miss grows <= 2x from 10^3 to 10^6 (%s)' % where,
                                '%.2fx (%s)' % (g, span), grown))
            gi = pts[-1]['ummunot_inval_ns'] / pts[0]['ummunot_inval_ns']
            run.targets.append(('7', 'invalidation O(log n): grows <= 2x (%s)' % where,
                                '%.2fx (%s)' % (gi, span), at_most(gi, 2.0)))
        return md
    return s


def s_ofi_hit(run):
    ov = run.load('vm-ofi-valid')
    if not ov:
        return None
    md = []
    w = md.append
    n = ov['ns_per_hit']
    w('fi_mr_reg() + fi_close() of one 64 KiB buffer: a cache search that hits, the '
      'monitor\'s valid(), a release; best of 5 x %d, each monitor in its own '
      'process.\n' % ov['iters'])
    w('| monitor | ns per hit |')
    w('|---|---|')
    w('| none (valid() returns at once: the floor) | %.1f |' % n['none'])
    w('| libummunot-ofi | %.1f |' % n['ummunot'])
    w('| libfabric default | %.1f |' % n['default'])
    w('')
    run.targets.append(('8', 'cost libummunot-ofi adds to a libfabric cache hit',
                        '%.1f ns (%.2fx the floor)' % (ov['ummunot_added_ns'],
                                                      n['ummunot'] / n['none']),
                        'no target'))
    return md


def mpi_pingpong(tr):
    """9. Open MPI ping-pong over transport TR, the stack's hooks against
    the ummunot adapter."""
    def s(run):
        meta = run.meta
        pp = {}		# (mode, series) -> {bytes: best half round trip}
        jobs = 0
        for mode in ('hooks', 'ummunot'):
            for i in range(1, 10):
                d = run.load('mpi-pingpong-%s-%s-%d' % (tr, mode, i))
                if d is None:
                    continue
                jobs = max(jobs, i)
                for ser in ('reuse', 'free'):
                    for r in d.get(ser, []):
                        cur = pp.setdefault((mode, ser), {}).get(r['bytes'])
                        if cur is None or r['half_rtt_ns'] < cur:
                            pp[(mode, ser)][r['bytes']] = r['half_rtt_ns']
        if not any(k[0] == 'ummunot' for k in pp) or not any(k[0] == 'hooks' for k in pp):
            return None
        icount = 'icount' in meta.get('mode', '')
        md = []
        w = md.append
        w('"hooks": the stack\'s defaults (Open MPI\'s patcher%s); "ummunot": every hook '
          'off and the adapter preloaded (integration-guide.rst).  "reuse": one buffer per '
          'size, the cache hits; "free": malloc() and free() around every round trip.  Best '
          'of %d job(s) each (alternated), each the best of 3 medians of half round '
          'trips.%s\n' % (' imported into libfabric' if tr == 'ofi' else ' feeding UCX', jobs,
                           '  One vCPU, QEMU -icount (instructions, not host time), '
                           'ranks yield when idle.' if icount else ''))
        w('| series | bytes | hooks (us) | ummunot (us) | ummunot / hooks | hooks MB/s | ummunot MB/s |')
        w('|---|---|---|---|---|---|---|')
        worst = {}
        for ser in ('reuse', 'free'):
            h_all, u_all = pp.get(('hooks', ser), {}), pp.get(('ummunot', ser), {})
            for b in sorted(set(h_all) & set(u_all)):
                h, u = h_all[b], u_all[b]
                worst[ser] = max(worst.get(ser, 0), u / h)
                w('| %s | %d | %.1f | %.1f | %.3f | %.1f | %.1f |'
                  % (ser, b, h / 1e3, u / 1e3, u / h, b / h * 1e3, b / u * 1e3))
        w('')
        # Under plain TCG a small round trip takes 15-50 us or one scheduler
        # tick by chance, and the guest's clock follows the host's load: the
        # ratios measure stalls.  Only an -icount run is judged.
        for ser, what, limit in (('reuse', 'reused buffers: ummunot within 5% of the hooks',
                                  1.05),
                                 ('free', 'buffers freed each time: ummunot no slower than '
                                  'the hooks', 1.0)):
            if ser not in worst:
                continue
            run.targets.append(('9', '%s ping-pong, %s' % (tr, what), 'worst %.3fx' % worst[ser],
                                at_most(worst[ser], limit) if icount else 'not judged (plain TCG; judged under --icount)'))
        return md
    return s


def s_ucx_hit(run):
    uh, uu = run.load('vm-ucx-hit-ucx-hooks'), run.load('vm-ucx-hit-ummunot')
    if not uh or not uu:
        return None
    md = []
    w = md.append
    w('One 1 MiB region, %d batches of %d hits, each configuration in its own process '
      'in one boot: UCX\'s hooks, and libummunot-ucx preloaded with them off (the '
      'adapter wraps ucs_rcache_get and first checks the ring).\n'
      % (uu['batches'], uu['hits_per_batch']))
    w('| configuration | median ns per hit | min ns per hit |')
    w('|---|---|---|')
    for d in (uh, uu):
        w('| %s | %.1f | %.1f |' % (d['config'], d['hit_ns_median'], d['hit_ns_min']))
    w('')
    run.targets.append(('10', 'cost libummunot-ucx adds to a UCX rcache hit',
                        '%+.1f ns median (%.2fx), %+.1f ns min'
                        % (uu['hit_ns_median'] - uh['hit_ns_median'],
                           uu['hit_ns_median'] / uh['hit_ns_median'],
                           uu['hit_ns_min'] - uh['hit_ns_min']), 'no target'))
    return md


# name (scripts/docs-results render bench-NAME), heading in results.md, section
SECTIONS = [
    ('cache-hit', '1. Cache hit cost (get + put), host', s_cache_hit),
    ('munmap', '2. Cost added to munmap() of a watched 64 KiB region, VM', s_munmap),
    ('scale', '3. Scaling with the number of watched regions, VM', s_scale),
    ('rdma', '4. malloc + RDMA WRITE + free over Soft-RoCE (rxe), VM', s_rdma),
    ('rdma-churn', '4b. The same with mmap + munmap: every buffer really unmapped, VM',
     s_rdma_churn),
    ('events', '5. Event drain and visibility, VM', s_events),
    ('memory', '6. Memory', s_memory),
    ('cache-scale-vm', '7. Miss and invalidation cost against n, VM',
     cache_scale('cache-scale-vm', 'VM')),
    ('cache-scale', '7. Miss and invalidation cost against n, host',
     cache_scale('cache-scale', 'host')),
    ('ofi-hit', '8. libfabric MR cache hit (verbs, rxe), VM', s_ofi_hit),
    ('mpi-ofi', '9. Open MPI ping-pong over mtl ofi (verbs;ofi_rxm, rxe), VM',
     mpi_pingpong('ofi')),
    ('mpi-ucx', '9. Open MPI ping-pong over pml ucx (rc_verbs, rxe), VM', mpi_pingpong('ucx')),
    ('ucx-hit', '10. UCX registration cache hit (ucs_rcache_get + put), VM', s_ucx_hit),
]

# What a run is expected to have; the rest depends on the stacks found.
EXPECTED = ['cache-hit', 'vm-munmap', 'vm-scale', 'vm-rdma', 'vm-events', 'cache-scale']


def section(run, name):
    """The lines of section NAME (SECTIONS), or None."""
    for n, _, f in SECTIONS:
        if n == name:
            return f(run)
    raise KeyError(name)


def targets(run):
    """The target table: every section evaluated, in order."""
    run.targets = []
    for _, _, f in SECTIONS:
        f(run)
    md = ['| # | target | measured | verdict |', '|---|---|---|---|']
    for t in run.targets:
        md.append('| %s | %s | %s | %s |' % t)
    md.append('')
    missing = [n for n in EXPECTED if not os.path.exists(os.path.join(run.raw, n + '.json'))]
    if missing:
        md.append('Not measured in this run (see its log): %s\n' % ', '.join(missing))
    return md


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith('-'):
        sys.stderr.write('usage: bench/report.py RUN_DIR (writes RUN_DIR/results.md '
                         'from RUN_DIR/raw/*.json)\n')
        sys.exit(2)
    out = sys.argv[1]
    run = DrawingRun(out)
    meta = run.meta
    md = ['# ummunot benchmarks, %s\n' % meta.get('date', '?'), stamp(meta) + '\n']
    for _, title, f in SECTIONS:
        lines = f(run)
        if lines is not None:
            md.append('## %s\n' % title)
            md += lines
    md.append('## Targets\n')
    md += targets(Run(run.raw))
    with open(os.path.join(out, 'results.md'), 'w') as f:
        f.write('\n'.join(md) + '\n')


if __name__ == '__main__':
    main()
