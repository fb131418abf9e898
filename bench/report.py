#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Turn one scripts/bench run (DIR/raw/*.json) into DIR/results.md and
DIR/*.png (gnuplot).  Standard library only.  Every comparison is a ratio
of figures measured in the same run; targets are checked and a miss is
stated with its size, never hidden."""
import json
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


def main():
    out = sys.argv[1]
    raw = os.path.join(out, 'raw')
    md = []
    w = md.append
    meta = load(raw, 'meta') or {}
    w('# ummunot benchmarks, %s\n' % meta.get('date', '?'))
    w('Host: %s; load average at start: %s; mode: %s; VM kernel %s (QEMU/TCG, '
      'absolute VM times are emulated and only their ratios mean anything).\n'
      % (meta.get('host', '?'), meta.get('load', '?'), meta.get('mode', '?'),
         meta.get('kernel', '?')))
    targets = []

    # 1. cache hit -----------------------------------------------------
    ch = load(raw, 'cache-hit')
    if ch:
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
        w('## 1. Cache hit cost (get + put), host\n')
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
        if plot(out, 'cache-hit', dat,
                   "set title 'Cache hit (get+put): aggregate throughput'\n"
                   "set xlabel 'threads'; set ylabel 'Mops/s (higher is better)'\n"
                   "set xtics (1,2,4); set yrange [0:*]; set key left bottom; set grid\n"
                   "plot '%s' u 1:2 w lp t 'libummunot', '' u 1:3 w lp t 'UCX ucs_rcache', "
                   "'' u 1:4 w lp t 'mutex + std::map'\n"):
            w('![cache hit](cache-hit.png)\n')
        # Single thread: CPU time, which the other tenants of a shared host
        # disturb far less than wall time (both are in the table).
        if parts:
            w('Parts of a hit, one thread, CPU ns: ' +
              ', '.join('%s %.1f' % p for p in parts) + '.\n')
        one = {v: med[(v, 1)]['cpu_time'] for v in variants}
        r1 = one['ummunot'] / one['ucx_rcache']
        targets.append(('1', 'single-thread hit <= 0.5x UCX (CPU time)',
                        '%.2fx (%.1f vs %.1f ns)' % (r1, one['ummunot'], one['ucx_rcache']),
                        verdict(r1 <= 0.5, '' if r1 <= 0.5 else 'by %.1fx' % (r1 / 0.5))))
        if (('ummunot', 2) in med):
            r2 = med[('ummunot', 2)]['items_per_second'] / med[('ucx_rcache', 2)]['items_per_second']
            if busy(meta, 2):
                # Two threads that time-share busy cores measure the
                # scheduler, not the cache (issue 11: refuse to judge).
                targets.append(('1', '2-thread aggregate >= 10x UCX', '%.2fx' % r2,
                                'not judged (%s cores, load %s)'
                                % (meta.get('cpus', '?'), meta.get('load', '?'))))
            else:
                targets.append(('1', '2-thread aggregate >= 10x UCX', '%.2fx' % r2,
                                verdict(r2 >= 10, '' if r2 >= 10 else 'by %.1fx' % (10 / r2))))
            grows = all(med[('ummunot', t)]['items_per_second'] >
                        1.2 * med[('ummunot', 1)]['items_per_second'] for t in threads if t > 1)
            shown = ', '.join('%d: %.2f M/s' % (t, med[('ummunot', t)]['items_per_second'] / 1e6)
                              for t in threads)
            if busy(meta, max(threads)):
                # Threads time-share busy cores: no variant can scale.
                targets.append(('1', 'ummunot aggregate grows with threads', shown,
                                'not judged (%s cores, load %s)'
                                % (meta.get('cpus', '?'), meta.get('load', '?'))))
            else:
                targets.append(('1', 'ummunot aggregate grows with threads (>1.2x)', shown,
                                verdict(grows, '')))

    # 2. munmap ----------------------------------------------------------
    mu = load(raw, 'vm-munmap')
    if mu:
        w('## 2. Cost added to munmap() of a watched 64 KiB region, VM\n')
        w('Median of %d round medians, each over %d munmaps per variant; variants '
          'alternate munmap by munmap.\n'
          % (mu['rounds'], mu['per_round']))
        w('| pages | monitor | munmap us | ratio to none |')
        w('|---|---|---|---|')
        for r in mu['results']:
            w('| %s | %s | %.1f | %.2fx |' % (r['pages'], r['monitor'], r['munmap_ns'] / 1e3,
                                          r['ratio_to_none']))
            if r['monitor'] == 'ummunot':
                targets.append(('2', 'munmap with ummunot <= 1.1x (%s)' % r['pages'],
                                '%.2fx' % r['ratio_to_none'],
                                verdict(r['ratio_to_none'] <= 1.1, '')))
        w('')

    # 3. scale -------------------------------------------------------------
    sc = load(raw, 'vm-scale')
    if sc:
        w('## 3. Scaling with the number of watched regions, VM\n')
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
        if plot(out, 'scale', dat,
                   "set title 'Register/unregister one region vs regions watched (VM)'\n"
                   "set logscale x; set xlabel 'regions watched'; set ylabel 'us per ioctl'\n"
                   "set yrange [0:*]; set key left top; set grid\n"
                   "plot '%s' u 1:2 w lp t 'register', '' u 1:3 w lp t 'unregister'\n"):
            w('![scale](scale.png)\n')
        regs = sc['register']
        lo, hi = regs[0], regs[-1]
        grow = hi['register_ns'] / lo['register_ns']
        # O(log n): from n0 to n1 the cost may grow by about log(n1)/log(n0).
        import math
        allowed = math.log(hi['regions']) / math.log(lo['regions'])
        targets.append(('3', 'register cost O(log n) or better',
                        '%.2fx from %d to %d regions (log ratio %.1fx)'
                        % (grow, lo['regions'], hi['regions'], allowed),
                        verdict(grow <= 2 * allowed, 'allowing 2x noise')))
        fo = sc['munmap_fanout']
        per = [r['ns_per_region'] for r in fo if r['regions'] >= 1000]
        if len(per) >= 2:
            targets.append(('3', 'munmap fan-out, per-region cost %d -> %d regions'
                            % (1000, fo[-1]['regions']),
                            '%.0f ns -> %.0f ns per region' % (per[0], per[-1]),
                            'no target (%.1fx)' % (per[-1] / per[0])))

    # 4. RDMA --------------------------------------------------------------
    rd = load(raw, 'vm-rdma')
    if rd:
        w('## 4. malloc + RDMA WRITE + free over Soft-RoCE (rxe), VM\n')
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
        if plot(out, 'rdma', dat,
                   "set title 'malloc + RDMA WRITE + free over rxe (VM, TCG)'\n"
                   "set logscale xy; set xlabel 'message KiB'; set ylabel 'us per message'\n"
                   "set key left top; set grid\n"
                   "plot '%s' u 1:2 w lp t 'register per message', '' u 1:3 w lp t 'libummunot cache', "
                   "'' u 1:4 w lp t 'preregistered (limit)'\n"):
            w('![rdma](rdma.png)\n')
        targets.append(('4', 'cache within 10% of preregistered at every size',
                        'worst %.2fx' % worst, verdict(worst <= 1.10, '')))
        targets.append(('4', 'zero stale hits', '%d' % rd['stale_total'],
                        verdict(rd['stale_total'] == 0, '')))
        if rd.get('churn'):
            w('### 4b. The same with mmap + munmap: every buffer really unmapped\n')
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
            targets.append(('4b', 'churn: cache costs no more than registering per message',
                            'worst %.2fx' % worst_c, 'no target (%.2fx)' % worst_c))

    # 5. events ------------------------------------------------------------
    ev = load(raw, 'vm-events')
    if ev:
        w('## 5. Event drain and visibility, VM\n')
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

    # 6. memory ------------------------------------------------------------
    sc_mem = sc['memory'] if sc else None
    cm = load(raw, 'cache-mem-vm') or load(raw, 'cache-mem')
    if sc_mem or cm:
        w('## 6. Memory\n')
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
            targets.append(('6', 'kernel <= 128 bytes per region',
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
            targets.append(('6', 'library <= 192 bytes per cached entry',
                            '%.1f' % cm['ummunot_bytes_per_entry'],
                            at_most_bytes(cm['ummunot_bytes_per_entry'], 192)))
        w('')

    # 7. miss and invalidation cost vs n ------------------------------------
    for name, where in (('cache-scale-vm', 'VM'), ('cache-scale', 'host')):
        cs = load(raw, name)
        if not cs:
            continue
        where = '%s, device %s' % (where, cs['device'])
        w('## 7. Miss and invalidation cost against n, %s\n' % where)
        w('Both caches hold n one-page entries (no-op backend); rounds alternate between '
          'them: %d misses at fresh addresses, then %d invalidations of those entries '
          '(`ummunot_cache_invalidate` / `ucs_rcache_region_invalidate`); medians of %d '
          'rounds, CPU time of the thread.  "fill" is the mean time per miss while filling '
          'the cache from 0 to n.  Load average during the run: %s.\n'
          % (cs['misses_per_round'], cs['misses_per_round'], cs['rounds'], cs['load']))
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
        png = name
        if plot(out, png, dat,
                "set title 'miss and invalidation cost vs cached entries (%s)'\n"
                "set logscale xy; set xlabel 'entries in the cache (n)'; "
                "set ylabel 'ns per operation (CPU)'\n"
                "set key left top; set grid\n"
                "plot '%%s' u 1:2 w lp t 'ummunot miss', '' u 1:3 w lp t 'UCX miss', "
                "'' u 1:4 w lp t 'ummunot invalidate', '' u 1:5 w lp t 'UCX invalidate'\n"
                % where):
            w('![%s](%s.png)\n' % (png, png))
        worst = max(p['ummunot_miss_ns'] / p['ucx_miss_ns'] for p in pts)
        targets.append(('7', 'miss <= UCX at every n (%s)' % where,
                        'worst %.2fx' % worst,
                        verdict(worst <= 1.0, '' if worst <= 1.0 else 'by %.2fx' % worst)))
        if len(pts) >= 2:
            g = pts[-1]['ummunot_miss_ns'] / pts[0]['ummunot_miss_ns']
            span = '%d -> %d' % (pts[0]['n'], pts[-1]['n'])
            targets.append(('7', 'miss grows <= 2x from 10^3 to 10^6 (%s)' % where,
                            '%.2fx (%s)' % (g, span),
                            verdict(g <= 2.0 and pts[-1]['n'] >= 1000000,
                                    '' if pts[-1]['n'] >= 1000000 else 'n stopped at %d' % pts[-1]['n'])))
            gi = pts[-1]['ummunot_inval_ns'] / pts[0]['ummunot_inval_ns']
            targets.append(('7', 'invalidation O(log n): grows <= 2x (%s)' % where,
                            '%.2fx (%s)' % (gi, span), verdict(gi <= 2.0, '')))

    # 8. libfabric MR cache hit with libummunot-ofi ---------------------------
    ov = load(raw, 'vm-ofi-valid')
    if ov:
        n = ov['ns_per_hit']
        w('## 8. libfabric MR cache hit (verbs, rxe), VM\n')
        w('fi_mr_reg() + fi_close() of one 64 KiB buffer: a cache search that hits, the '
          'monitor\'s valid(), a release; best of 5 x %d, each monitor in its own '
          'process.\n' % ov['iters'])
        w('| monitor | ns per hit |')
        w('|---|---|')
        w('| none (valid() returns at once: the floor) | %.1f |' % n['none'])
        w('| libummunot-ofi | %.1f |' % n['ummunot'])
        w('| libfabric default | %.1f |' % n['default'])
        w('')
        targets.append(('8', 'cost libummunot-ofi adds to a libfabric cache hit',
                        '%.1f ns (%.2fx the floor)' % (ov['ummunot_added_ns'],
                                                      n['ummunot'] / n['none']),
                        'no target'))

    # 9. Open MPI ping-pong, the stacks' hooks vs the ummunot adapters -----
    names = {'ofi': 'mtl ofi (verbs;ofi_rxm, rxe)', 'ucx': 'pml ucx (rc_verbs, rxe)'}
    for tr in ('ofi', 'ucx'):
        pp = {}		# (mode, series) -> {bytes: best half round trip}
        jobs = 0
        for mode in ('hooks', 'ummunot'):
            for i in range(1, 10):
                d = load(raw, 'mpi-pingpong-%s-%s-%d' % (tr, mode, i))
                if d is None:
                    continue
                jobs = max(jobs, i)
                for ser in ('reuse', 'free'):
                    for r in d.get(ser, []):
                        cur = pp.setdefault((mode, ser), {}).get(r['bytes'])
                        if cur is None or r['half_rtt_ns'] < cur:
                            pp[(mode, ser)][r['bytes']] = r['half_rtt_ns']
        if not any(k[0] == 'ummunot' for k in pp) or not any(k[0] == 'hooks' for k in pp):
            continue
        w('## 9. Open MPI ping-pong over %s, VM\n' % names[tr])
        w('"hooks": the stack\'s defaults (Open MPI\'s patcher%s); "ummunot": every hook '
          'off and the adapter preloaded (integration-guide.rst).  "reuse": one buffer per '
          'size, the cache hits; "free": malloc() and free() around every round trip.  Best '
          'of %d job(s) each (alternated), each the best of 3 medians of half round '
          'trips.%s\n' % (' imported into libfabric' if tr == 'ofi' else ' feeding UCX', jobs,
                           '  One vCPU, QEMU -icount (instructions, not host time), '
                           'ranks yield when idle.' if 'icount' in meta.get('mode', '')
                           else ''))
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
        if 'reuse' in worst:
            targets.append(('9', '%s ping-pong, reused buffers: ummunot within 5%% of the hooks'
                            % tr, 'worst %.3fx' % worst['reuse'],
                            verdict(worst['reuse'] <= 1.05, '')))
        if 'free' in worst:
            targets.append(('9', '%s ping-pong, buffers freed each time: ummunot no slower '
                            'than the hooks' % tr, 'worst %.3fx' % worst['free'],
                            verdict(worst['free'] <= 1.0, '')))

    # 10. UCX rcache hit: UCX's hooks vs libummunot-ucx ------------------
    uh, uu = load(raw, 'vm-ucx-hit-ucx-hooks'), load(raw, 'vm-ucx-hit-ummunot')
    if uh and uu:
        w('## 10. UCX registration cache hit (ucs_rcache_get + put), VM\n')
        w('One 1 MiB region, %d batches of %d hits, each configuration in its own process '
          'in one boot: UCX\'s hooks, and libummunot-ucx preloaded with them off (the '
          'adapter wraps ucs_rcache_get and first checks the ring).\n'
          % (uu['batches'], uu['hits_per_batch']))
        w('| configuration | median ns per hit | min ns per hit |')
        w('|---|---|---|')
        for d in (uh, uu):
            w('| %s | %.1f | %.1f |' % (d['config'], d['hit_ns_median'], d['hit_ns_min']))
        w('')
        targets.append(('10', 'cost libummunot-ucx adds to a UCX rcache hit',
                        '%+.1f ns median (%.2fx), %+.1f ns min'
                        % (uu['hit_ns_median'] - uh['hit_ns_median'],
                           uu['hit_ns_median'] / uh['hit_ns_median'],
                           uu['hit_ns_min'] - uh['hit_ns_min']), 'no target'))

    w('## Targets\n')
    w('| # | target | measured | verdict |')
    w('|---|---|---|---|')
    for t in targets:
        w('| %s | %s | %s | %s |' % t)
    w('')
    missing = [n for n in ['cache-hit', 'vm-munmap', 'vm-scale', 'vm-rdma', 'vm-events',
                           'cache-scale']
               if not os.path.exists(os.path.join(raw, n + '.json'))]
    if missing:
        w('Not measured in this run (see the log): %s\n' % ', '.join(missing))
    with open(os.path.join(out, 'results.md'), 'w') as f:
        f.write('\n'.join(md) + '\n')


if __name__ == '__main__':
    main()
