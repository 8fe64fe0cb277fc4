//! Memory cgroups against the kernel's arithmetic and rules (kernel-and-anchors.md §A10):
//! hierarchical charging, memory.max reclaim then OOM, memory.high throttling, memory.min /
//! memory.low protection, the OOM killer's choice, node watermarks.
use colosim_core::lru;
use colosim_core::memcg::*;

const MI: u64 = 1 << 20;
const GI: u64 = 1 << 30;

/// root(0) → a(1) → {a1(2), a2(3)}; root → b(4).
fn tree(total: u64) -> Memory {
    Memory::new(&[None, Some(0), Some(1), Some(1), Some(0)], total, 0, 1_000)
}

#[test]
fn charges_add_up_the_hierarchy_and_peak_follows() {
    let mut m = tree(64 * GI);
    m.charge(2, 1, Kind::Anon, 10 * MI);
    m.charge(3, 2, Kind::File, 6 * MI);
    m.charge(4, 3, Kind::Anon, MI);
    assert_eq!(m.cgs[1].usage, 16 * MI);
    assert_eq!(m.cgs[0].usage, 17 * MI);
    m.uncharge(2, 1, Kind::Anon, 4 * MI);
    assert_eq!(
        (m.cgs[2].usage, m.cgs[1].usage, m.cgs[1].peak),
        (6 * MI, 12 * MI, 16 * MI)
    );
    m.release(1);
    assert_eq!((m.cgs[2].usage, m.cgs[2].anon), (0, 0));
    assert_eq!(m.free(), 64 * GI - 7 * MI);
}

#[test]
fn memory_max_reclaims_cache_first_and_charges_the_task_per_page() {
    let mut m = tree(64 * GI);
    m.cgs[1].max = 100 * MI;
    m.charge(2, 1, Kind::File, 80 * MI);
    let c = m.charge(2, 1, Kind::Anon, 50 * MI);
    // 30 MiB over: exactly that much cache reclaimed, 7680 pages × 1 µs
    assert_eq!(c.reclaimed, 30 * MI);
    assert_eq!(c.reclaim_ns, 30 * MI / PAGE * 1_000);
    assert!(c.killed.is_empty() && !c.failed);
    assert_eq!(
        (m.cgs[2].file, m.cgs[2].anon, m.cgs[1].usage),
        (50 * MI, 50 * MI, 100 * MI)
    );
    // one max event per refused charge round of SWAP_CLUSTER_MAX pages (`try_charge_memcg`
    // → `memcg_memory_event(MEMCG_MAX)` before each `try_to_free_mem_cgroup_pages`):
    // 30 MiB / 128 KiB
    assert_eq!(m.cgs[1].events.max, 240);
}

#[test]
fn limits_are_never_exceeded_in_the_accounting() {
    let mut m = tree(2 * GI);
    m.cgs[1].max = 300 * MI;
    m.cgs[2].max = 200 * MI;
    m.cgs[4].max = 500 * MI;
    // a deterministic pseudo-random mix of charges and uncharges
    let mut x: u64 = 12345;
    for _ in 0..2000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let cg = [2, 3, 4][(x >> 33) as usize % 3];
        let owner = (x >> 40) as usize % 4;
        let kind = if (x >> 20) & 1 == 0 { Kind::Anon } else { Kind::File };
        let bytes = ((x >> 8) % 64 + 1) * PAGE * 16;
        if (x >> 50).is_multiple_of(4) {
            m.uncharge(cg, owner, kind, bytes);
        } else {
            m.charge(cg, owner, kind, bytes);
        }
        for c in &m.cgs {
            assert!(c.usage <= c.max, "usage {} over max {}", c.usage, c.max);
        }
        assert!(m.cgs[0].usage <= m.total);
        // usage is own pages plus the children's usage
        for (i, c) in m.cgs.iter().enumerate() {
            let kids: u64 = c.children.iter().map(|&k| m.cgs[k].usage).sum();
            assert_eq!(c.usage, c.anon + c.file + kids, "cgroup {i}");
        }
        let rss: u64 = m.rss.values().sum();
        assert_eq!(rss, m.cgs.iter().map(|c| c.anon).sum::<u64>());
    }
}

#[test]
fn memcg_oom_kills_the_largest_process_inside_the_group_only() {
    let mut m = tree(64 * GI);
    m.cgs[1].max = 100 * MI;
    m.charge(4, 9, Kind::Anon, 500 * MI); // outside, the biggest on the node
    m.charge(2, 1, Kind::Anon, 60 * MI);
    m.charge(3, 2, Kind::Anon, 30 * MI);
    let c = m.charge(3, 2, Kind::Anon, 20 * MI); // no cache to reclaim, no swap
    assert_eq!(c.killed, vec![1]); // 60 MiB beats 30 MiB; the 500 MiB outside is not eligible
    assert_eq!(m.cgs[1].usage, 50 * MI);
    assert_eq!(m.cgs[4].usage, 500 * MI);
    assert_eq!(
        (
            m.cgs[1].events.oom,
            m.cgs[2].events.oom_kill,
            m.cgs[1].events.oom_kill,
            m.cgs[0].events.oom_kill
        ),
        (1, 1, 1, 1)
    );
}

#[test]
fn oom_score_adj_weighs_and_minus_1000_exempts() {
    let mut m = tree(64 * GI);
    m.cgs[1].max = 100 * MI;
    m.charge(2, 1, Kind::Anon, 60 * MI);
    m.charge(3, 2, Kind::Anon, 30 * MI);
    // adj 400 adds 400/1000 of the 100 MiB limit = 40 MiB of points: 70 > 60
    m.oom_score_adj.insert(2, 400);
    let c = m.charge(3, 3, Kind::Anon, 20 * MI);
    assert_eq!(c.killed, vec![2]);
    let mut m = tree(64 * GI);
    m.cgs[1].max = 100 * MI;
    m.charge(2, 1, Kind::Anon, 60 * MI);
    m.charge(3, 2, Kind::Anon, 30 * MI);
    m.oom_score_adj.insert(1, OOM_SCORE_ADJ_MIN);
    assert_eq!(m.charge(3, 3, Kind::Anon, 20 * MI).killed, vec![2]);
}

#[test]
fn oom_group_takes_every_process_of_the_group() {
    let mut m = tree(64 * GI);
    m.cgs[1].max = 100 * MI;
    m.cgs[2].oom_group = true;
    m.charge(2, 1, Kind::Anon, 40 * MI);
    m.charge(2, 2, Kind::Anon, 20 * MI);
    m.charge(3, 3, Kind::Anon, 30 * MI);
    let c = m.charge(3, 3, Kind::Anon, 20 * MI);
    assert_eq!(c.killed, vec![1, 2]);
    assert_eq!(m.cgs[2].usage, 0);
    assert_eq!(m.cgs[3].usage, 50 * MI);
}

#[test]
fn memory_high_penalty_matches_the_kernel_table() {
    // kernel-and-anchors.md §A10, high = 100 MB, a batch of 64 pages:
    // 1% over ≈ 6 ms, 5% ≈ 159 ms, 10% ≈ 639 ms, 17% ≈ 1.85 s, ≥ 18% = 2 s
    let high = 100_000_000u64;
    let raw = |pct: u64| raw_high_delay_jiffies(overage(high + high * pct / 100, high), 64);
    assert_eq!(raw(1), 6);
    assert_eq!(raw(5), 159);
    assert!((639..=640).contains(&raw(10)));
    assert!((1840..=1860).contains(&raw(17)));
    assert_eq!(high_delay_ns(overage(high + high / 100, high), 64), 0); // ≤ 10 ms: no sleep
    assert_eq!(high_delay_ns(overage(high + high * 5 / 100, high), 64), 159_000_000);
    assert_eq!(
        high_delay_ns(overage(high + high * 18 / 100, high), 64),
        MAX_HIGH_DELAY_NS
    );
    assert_eq!(high_delay_ns(overage(high * 3, high), 64), MAX_HIGH_DELAY_NS);
    // scaled by the pages charged: half a batch, half the sleep
    assert_eq!(raw_high_delay_jiffies(overage(high + high / 10, high), 32), raw(10) / 2);
}

#[test]
fn memory_high_throttles_instead_of_killing() {
    let mut m = tree(64 * GI);
    m.cgs[2].high = 100 * MI;
    let c = m.charge(2, 1, Kind::Anon, 100 * MI);
    assert_eq!(c.throttle_ns, 0);
    // 10% over with nothing reclaimable (anon, no swap): a sleep, no OOM
    let c = m.charge(2, 1, Kind::Anon, 10 * MI);
    assert!(c.killed.is_empty() && !c.failed);
    assert_eq!(m.cgs[2].usage, 110 * MI);
    assert_eq!(
        c.throttle_ns,
        high_delay_ns(overage(110 * MI, 100 * MI), 10 * MI / PAGE)
    );
    assert!(c.throttle_ns == MAX_HIGH_DELAY_NS); // 2560 pages: 40 batches of a 640 ms sleep, capped
    assert_eq!((m.cgs[2].events.high, m.cgs[2].events.oom), (1, 0));
    // with cache to reclaim, the overage is reclaimed instead and nobody sleeps
    let mut m = tree(64 * GI);
    m.cgs[2].high = 100 * MI;
    m.charge(2, 1, Kind::File, 50 * MI);
    m.charge(2, 1, Kind::Anon, 50 * MI);
    let c = m.charge(2, 1, Kind::Anon, 10 * MI);
    assert_eq!((c.reclaimed, c.throttle_ns, m.cgs[2].usage), (10 * MI, 0, 100 * MI));
}

#[test]
fn memory_min_is_never_reclaimed_while_other_memory_is() {
    let mut m = tree(64 * GI);
    m.cgs[1].max = 200 * MI;
    m.cgs[2].min = 80 * MI;
    m.charge(2, 1, Kind::File, 100 * MI); // 80 protected, 20 not
    m.charge(3, 2, Kind::File, 100 * MI);
    let c = m.charge(3, 2, Kind::Anon, 60 * MI);
    // 60 MiB to find: each list scanned in proportion to what protection leaves it
    // (`mem_cgroup_protection` in get_scan_count: 100 MiB × 20/100 against 100 MiB), so
    // about 10 and 50 — here 11.0 and 49.0, from `size >> priority` rounded down per 32-page
    // round and the shared walk's order; by size (100:100) it would be 30 each.
    assert_eq!(c.reclaimed, 60 * MI);
    let (a1, a2) = (100 * MI - m.cgs[2].file, 100 * MI - m.cgs[3].file);
    assert!((9 * MI..=12 * MI).contains(&a1) && a1 + a2 == 60 * MI, "a1 gave {a1}");
    // needing more than is unprotected: a2's cache, then a1's last unprotected 10, then OOM
    let c = m.charge(3, 2, Kind::Anon, 100 * MI);
    assert!(m.cgs[2].file >= 80 * MI, "memory.min reclaimed: {}", m.cgs[2].file);
    assert!(!c.killed.is_empty());
}

#[test]
fn memory_low_is_spared_on_the_first_pass_only() {
    let mut m = tree(64 * GI);
    m.cgs[1].max = 200 * MI;
    m.cgs[2].low = 100 * MI;
    m.charge(2, 1, Kind::File, 100 * MI);
    m.charge(3, 2, Kind::File, 60 * MI);
    // 160 + 60 = 20 over: all of it from a2, a1's cache is under its low
    let c = m.charge(3, 2, Kind::Anon, 60 * MI);
    assert_eq!(
        (m.cgs[2].file, m.cgs[3].file, c.reclaimed),
        (100 * MI, 40 * MI, 20 * MI)
    );
    assert_eq!(m.cgs[2].events.low, 0);
    // 50 more: a2's last 40 on the first pass, then the second pass takes 10 of a1's, and says so
    let c = m.charge(3, 2, Kind::Anon, 50 * MI);
    assert_eq!((c.reclaimed, m.cgs[3].file, m.cgs[2].file), (50 * MI, 0, 90 * MI));
    assert!(m.cgs[2].events.low >= 1 && c.killed.is_empty());
}

#[test]
fn overcommitted_protection_is_shared_in_proportion() {
    let mut m = tree(64 * GI);
    m.cgs[1].low = 100 * MI;
    m.cgs[2].low = 100 * MI;
    m.cgs[3].low = 100 * MI;
    m.charge(2, 1, Kind::File, 100 * MI);
    m.charge(3, 2, Kind::File, 100 * MI);
    m.charge(4, 3, Kind::File, 100 * MI);
    let eff = m.effective_protection(0, true);
    assert_eq!(eff[&1], 100 * MI); // a child of the reclaim root: min(usage, low)
    assert_eq!((eff[&2], eff[&3]), (50 * MI, 50 * MI)); // 200 claimed of 100: halves
    assert_eq!(eff[&4], 0);
}

#[test]
fn node_watermarks_follow_min_free_kbytes() {
    // 64 GiB: int_sqrt(64 Gi/1 Ki × 16) = 32768 KiB; gap = max(8 MiB, 64 GiB × 10/10000)
    let w = Watermarks::for_total(64 * GI, 10);
    assert_eq!(w.min, 32_768 * 1024);
    let gap = 64 * GI / 1000;
    assert_eq!((w.low, w.high), (w.min + gap, w.min + 2 * gap));
    // a tiny node: the 128 KiB floor; a huge one: the 256 MiB cap
    assert_eq!(Watermarks::for_total(1 << 20, 10).min, 128 * 1024);
    assert_eq!(Watermarks::for_total(1 << 50, 10).min, 262_144 * 1024);
}

#[test]
fn the_node_reclaims_in_the_background_then_kills() {
    let mut m = tree(GI);
    let w = m.watermarks;
    m.charge(4, 9, Kind::File, 500 * MI);
    m.charge(2, 1, Kind::Anon, 300 * MI);
    // 224 MiB free, 222 asked: free would fall below low (≈ 5 MiB), so kswapd takes cache
    // back to the high watermark, at no cost to the task
    let c = m.charge(3, 2, Kind::Anon, 222 * MI);
    assert!(c.kswapd_reclaimed > 0 && c.reclaim_ns == 0);
    assert!(m.free() + PAGE >= w.high, "free {} high {}", m.free(), w.high);
    // anonymous memory beyond the node, no swap: the global OOM kills the largest process
    let c = m.charge(3, 2, Kind::Anon, 600 * MI);
    assert_eq!(c.killed.first(), Some(&1));
    assert!(m.global_ooms >= 1 && m.cgs[0].usage <= m.total);
}

#[test]
fn alinux_wmark_ratio_reclaims_in_the_background_to_the_low_watermark() {
    let mut m = tree(64 * GI);
    m.cgs[2].max = 100 * MI;
    m.cgs[2].wmark_ratio = 80; // wmark_high 80 MiB; low = 80 − 100 MiB × 50/10000 = 79.5 MiB
    m.charge(2, 1, Kind::File, 70 * MI);
    let c = m.charge(2, 1, Kind::File, 15 * MI); // 85 MiB > 80
    assert_eq!(c.reclaim_ns, 0); // background: free to the task
    assert_eq!(m.cgs[2].usage, 80 * MI - 100 * MI * 50 / 10_000);
    assert_eq!(c.kswapd_reclaimed, 85 * MI - m.cgs[2].usage);
    // with memory.high below the limit the watermarks follow memory.high
    let mut m = tree(64 * GI);
    m.cgs[2].max = 100 * MI;
    m.cgs[2].high = 50 * MI;
    m.cgs[2].wmark_ratio = 80;
    m.charge(2, 1, Kind::File, 45 * MI);
    assert_eq!(m.cgs[2].usage, 40 * MI - 50 * MI * 50 / 10_000);
}

#[test]
fn openeuler_high_async_ratio_reclaims_toward_ten_points_below() {
    let mut m = tree(64 * GI);
    m.cgs[2].high = 100 * MI;
    m.cgs[2].high_async_ratio = 80; // rubik's value: start at 80%, reclaim to 70%
    m.charge(2, 1, Kind::File, 79 * MI);
    assert_eq!(m.cgs[2].usage, 79 * MI);
    let c = m.charge(2, 1, Kind::File, 2 * MI);
    assert_eq!((m.cgs[2].usage, c.reclaim_ns, c.throttle_ns), (70 * MI, 0, 0));
}

#[test]
fn priority_oom_takes_the_least_important_group_first() {
    // a(1) → {a1(2) priority 10, a2(3) priority 2}: a2's small process goes before a1's big one
    let mut m = tree(64 * GI);
    m.cgs[1].max = 100 * MI;
    m.cgs[1].use_priority_oom = true;
    m.cgs[2].priority = 10;
    m.cgs[3].priority = 2;
    m.charge(2, 1, Kind::Anon, 70 * MI);
    m.charge(3, 2, Kind::Anon, 20 * MI);
    let c = m.charge(2, 1, Kind::Anon, 20 * MI);
    assert_eq!(c.killed, vec![2]);
    // without use_priority_oom, the kernel's badness alone: the bigger process
    let mut m = tree(64 * GI);
    m.cgs[1].max = 100 * MI;
    m.cgs[2].priority = 10;
    m.cgs[3].priority = 2;
    m.charge(2, 1, Kind::Anon, 70 * MI);
    m.charge(3, 2, Kind::Anon, 20 * MI);
    assert_eq!(m.charge(3, 2, Kind::Anon, 20 * MI).killed, vec![1]);
}

/// Alibaba Cloud Linux memory.wmark_min_adj (Documentation/alibaba/interfaces.rst).
#[test]
fn wmark_min_adj_takes_the_most_conservative_value_up_the_tree_but_intermediate_zeros() {
    // the document's own example: root → A → {B → {E, F}, C}, root → D
    let mut m = Memory::new(
        &[None, Some(0), Some(1), Some(1), Some(0), Some(2), Some(2)],
        GI,
        0,
        1_000,
    );
    for (cg, adj) in [(1, -10), (2, -25), (3, 0), (4, 50), (5, -25), (6, 50)] {
        m.cgs[cg].wmark_min_adj = adj;
    }
    let eadj: Vec<i64> = (1..=6).map(|cg| m.wmark_min_eadj(cg)).collect();
    assert_eq!(eadj, vec![-10, -10, 0, 50, -10, 50]);
    // an intermediate default 0 does not hide the -10 above it
    m.cgs[2].wmark_min_adj = 0;
    assert_eq!(m.wmark_min_eadj(5), -10);
}

#[test]
fn wmark_min_adj_moves_the_groups_min_watermark_by_the_documented_arithmetic() {
    // 1 GiB: min_free_kbytes = isqrt(1048576 × 16) = 4096 KiB; gap = max(1 MiB,
    // 2^30 × 10 / 10000 = 1073741) = 1073741 ⇒ WMARK_MIN 4194304, WMARK_LOW 5268045
    let mut m = tree(GI);
    assert_eq!((m.watermarks.min, m.watermarks.low), (4_194_304, 5_268_045));
    m.cgs[2].wmark_min_adj = -25; // 4194304 + 4194304 × (−25 %) = 3 MiB
    m.cgs[3].wmark_min_adj = 50; // 4194304 + 1073741 × 50 % = 4194304 + 536870
    assert_eq!(m.memcg_wmark_min(2), 3 * MI);
    assert_eq!(m.memcg_wmark_min(3), 4_731_174);
    assert_eq!(m.memcg_wmark_min(4), 4_194_304);
}

#[test]
fn a_positive_wmark_min_adj_throttles_in_proportion_to_the_pages_below_its_min() {
    // no cache and no swap: kswapd frees nothing, so free memory is what the charges leave
    let setup = || {
        let mut m = tree(GI);
        m.cgs[2].wmark_min_adj = -25; // LS
        m.cgs[3].wmark_min_adj = 50; // BE: min 4731174, span above the global min 536870
        m.charge(4, 9, Kind::Anon, GI - 5 * MI); // 5 MiB free
        m
    };
    // BE takes 768 KiB: free 4456448, 274726 B under its min ⇒ 100 ms × 274726 / 536870
    let mut m = setup();
    let c = m.charge(3, 1, Kind::Anon, 768 * 1024);
    assert_eq!((c.throttle_ns, c.reclaim_ns), (51_171_792, 0));
    assert_eq!(m.cgs[3].wmark_min_throttled_ns, 51_171_792);
    // counted up the tree, as memory.exstat is hierarchical
    assert_eq!(m.cgs[1].wmark_min_throttled_ns, 51_171_792);
    // 1 MiB leaves free exactly at the global min: the whole span, 100 ms
    let mut m = setup();
    assert_eq!(m.charge(3, 1, Kind::Anon, MI).throttle_ns, 100_000_000);
    // 256 KiB stays above its min (4980736 ≥ 4731174): no throttle
    let mut m = setup();
    assert_eq!(m.charge(3, 1, Kind::Anon, 256 * 1024).throttle_ns, 0);
    // LS, the same 1 MiB and more, down to 3.5 MiB free: under the global min, above its own
    let mut m = setup();
    let c = m.charge(2, 1, Kind::Anon, 3 * MI / 2);
    assert_eq!((c.throttle_ns, c.reclaimed, c.killed.len()), (0, 0, 0));
    assert_eq!(m.free(), 7 * MI / 2);
    // one byte under: the 1 ms floor; far under: the 1000 ms cap
    assert_eq!(wmark_min_throttle_ns(1, 536_870), 1_000_000);
    assert_eq!(wmark_min_throttle_ns(100 * MI, 536_870), 1_000_000_000);
}

/// The page cache LRU under a shared limit (lru.rs; mm/vmscan.c, mm/workingset.c): pod a(1)
/// at 64 MiB holds a reader a1(2) and a writer a2(3). The reader's 32 files of 1 MiB were each
/// read twice (active); the writer then streams 1 GiB through a2, each 1 MiB chunk written
/// once. The pod's hierarchical inactive list (the stream) is never low against its active
/// one (the reader's 32 MiB ≤ the 32 MiB left), so reclaim never deactivates, and the stream
/// evicts only itself — by recency, where reclaim by size would take half the reader's.
#[test]
fn a_twice_read_set_survives_a_sibling_stream_under_a_shared_limit() {
    // pod a(1) at 64 MiB; the reader a1(2) reads its 32 files (twice when `twice`), then the
    // writer a2(3) streams 1 GiB of 1 MiB chunks
    fn reader_then_stream(twice: bool) -> Memory {
        let mut m = tree(64 * GI);
        m.cgs[1].max = 64 * MI;
        let files = m.cache.register(2, 32, MI);
        let chunks = m.cache.register(3, 1024, MI);
        for i in 0..32 {
            m.charge_object(2, 10, files, i, true);
            if twice {
                m.cache.touch(files, i);
            }
        }
        if twice {
            assert_eq!(m.cache.lists(2), (0, 32 * MI));
        }
        for i in 0..1024 {
            let c = m.charge_object(3, 11, chunks, i, false);
            if twice {
                assert!(!c.failed && c.killed.is_empty());
            }
        }
        m
    }
    let m = reader_then_stream(true);
    assert_eq!(m.cgs[2].file, 32 * MI);
    assert_eq!(m.cgs[3].file, 32 * MI);
    assert_eq!(m.cgs[1].usage, 64 * MI);
    // the same files read only once stay inactive and go with the stream — all but what a
    // list too small to be scanned keeps: a1's inactive list is scanned `size >> priority`
    // pages a round, 0 below 512 pages while the stream's 60-odd MiB meets the 32 pages by
    // priority 9 (3 + 7 + 15 + 31 pages)
    let m = reader_then_stream(false);
    assert!(m.cgs[2].file <= 2 * MI, "{}", m.cgs[2].file);
}

/// Refault distance is measured in the reclaim target's age (workingset_eviction takes the
/// target memcg's lruvec): a reader's file evicted by its pod's limit and read back after the
/// sibling stream evicted 40 MiB more has distance 41 MiB (its own page counts too) — over the
/// pod's 16 MiB active list, so it comes back inactive; read back at once (distance 1 MiB) it
/// comes back active.
#[test]
fn refaults_are_measured_in_the_reclaim_targets_age() {
    for (stream_mib, expect) in [(40u32, lru::Where::Inactive), (0, lru::Where::Active)] {
        let mut m = tree(64 * GI);
        m.cgs[1].max = 64 * MI;
        let hot = m.cache.register(2, 16, MI);
        let cold = m.cache.register(2, 1, MI);
        let once = m.cache.register(2, 24, MI);
        let chunks = m.cache.register(3, 1024, MI);
        for i in 0..16 {
            m.charge_object(2, 10, hot, i, true);
            m.cache.touch(hot, i);
        }
        m.charge_object(2, 10, cold, 0, true);
        // 24 MiB read once behind it: a1's inactive list is large enough to be scanned
        // beside the stream's (a list of 1 MiB is not, `size >> priority`)
        for i in 0..24 {
            m.charge_object(2, 10, once, i, true);
        }
        // fill the pod with the stream: the cold file is a1's inactive tail, so it is the
        // first of a1's to go once the limit is reached
        let mut i = 0;
        while m.cache.where_is(cold, 0) != lru::Where::Absent {
            m.charge_object(3, 11, chunks, i, false);
            i += 1;
        }
        let age = m.cache.age(1);
        for _ in 0..stream_mib {
            m.charge_object(3, 11, chunks, i, false);
            i += 1;
        }
        // each charge evicts one chunk, but the one that took the cold file may have taken a
        // chunk besides (whole objects: the pod's reclaim split its page between both lists)
        let aged = m.cache.age(1) - age;
        assert!(aged + MI / PAGE >= stream_mib as u64 * MI / PAGE && aged <= stream_mib as u64 * MI / PAGE);
        m.charge_object(2, 10, cold, 0, true);
        assert_eq!(m.cache.where_is(cold, 0), expect, "after {stream_mib} MiB");
    }
}

/// Pod a(1) limited to `limit` under cgroup v1 (legacy memcg) on a disk writing back at
/// `ns_per_byte`, and 1024 chunks of 1 MiB for the writer a2(3).
fn legacy_pod(limit: u64, ns_per_byte: f64) -> (Memory, lru::Space) {
    let mut m = tree(64 * GI);
    m.cgs[1].max = limit;
    m.cache.legacy = Some(lru::LegacyWait::new(ns_per_byte));
    let chunks = m.cache.register(3, 1024, MI);
    (m, chunks)
}

/// The writer's buffered write of chunk `i`: charged, then dirty in the root's writeback
/// domain (no cgroup writeback on v1).
fn write_chunk(m: &mut Memory, chunks: lru::Space, i: u32) -> Charge {
    let c = m.charge_object(3, 11, chunks, i, false);
    assert!(!c.failed && c.killed.is_empty(), "chunk {i}");
    m.cache.dirty(0, Some((chunks, i)), MI);
    c
}

/// cgroup v1 (legacy memcg) reclaim is throttled by writeback (mm/vmscan.c 6.6–6.18): pod
/// a(1) at 16 MiB full of the writer's 16 dirty 1 MiB chunks, the flusher's 4 MiB chunk in
/// flight (chunks 0–3, under writeback) due in 0.3 ms, the disk writing 2 ns a byte. Chunk
/// 16's first 32-page round meets chunks 0–3 at the inactive tail under writeback, not yet
/// PG_reclaim: each is set aside, unthrottled (case 2); chunk 4, dirty and not queued, makes
/// the reclaimer sleep in `reclaim_throttle(VMSCAN_THROTTLE_WRITEBACK)` until 32 pages more
/// are written back (`__acct_reclaim_writeback`): the completion in flight, 0.3 ms — not
/// HZ/10. Woken, chunks 0–3 are clean and rotated to the inactive tail
/// (`folio_rotate_reclaimable`); chunk 4 is set aside and chunk 3 goes, 32 pages a round, no
/// more waits. Chunks 17–19 take chunks 2, 1, 0. Chunk 20 meets chunks 5–7, under the
/// flusher's next chunk (in flight since the completion), then chunk 8, not queued: one
/// throttle until that chunk completes, 4 MiB × 2 ns.
#[test]
fn legacy_memcg_reclaim_throttle_waits_for_the_next_writeback_completion() {
    let (mut m, chunks) = legacy_pod(16 * MI, 2.0);
    for i in 0..16 {
        assert_eq!(write_chunk(&mut m, chunks, i).throttle_ns, 0);
    }
    m.cache.legacy.as_mut().unwrap().in_flight = Some((300_000, 4 * MI));
    let c = write_chunk(&mut m, chunks, 16);
    assert_eq!((c.reclaimed, c.throttle_ns), (MI, 300_000));
    assert_eq!(
        m.cache.waits,
        lru::WritebackWaits {
            throttles: 1,
            throttle_ns: 300_000,
            waits: 0,
            wait_ns: 0
        }
    );
    assert!(m.cache.kick_flusher, "reclaim met dirty pages nobody writes back");
    assert_eq!(m.cache.where_is(chunks, 3), lru::Where::Absent);
    assert!((0..3).all(|i| !m.cache.is_dirty(chunks, i) && m.cache.where_is(chunks, i) == lru::Where::Inactive));
    assert!(m.cache.is_dirty(chunks, 4) && m.cache.where_is(chunks, 4) == lru::Where::Active);
    for (i, gone) in [(17, 2), (18, 1), (19, 0)] {
        assert_eq!(write_chunk(&mut m, chunks, i).throttle_ns, 0, "chunk {i}");
        assert_eq!(m.cache.where_is(chunks, gone), lru::Where::Absent);
    }
    let c = write_chunk(&mut m, chunks, 20);
    assert_eq!(c.throttle_ns, 8 * MI);
    assert_eq!((m.cache.waits.throttles, m.cache.waits.waits), (2, 0));
    assert!((4..8).all(|i| !m.cache.is_dirty(chunks, i)) && m.cache.is_dirty(chunks, 8));
    assert_eq!(m.cgs[1].usage, 16 * MI);
    // a completion further off than HZ/10: the throttle times out at 100 ms
    let (mut m, chunks) = legacy_pod(16 * MI, 2.0);
    for i in 0..16 {
        write_chunk(&mut m, chunks, i);
    }
    m.cache.legacy.as_mut().unwrap().in_flight = Some((250_000_000, MI));
    assert_eq!(write_chunk(&mut m, chunks, 16).throttle_ns, 100_000_000);
    // cgroup v2 never waits here (case 2): the dirty chunks are only set aside — with nothing
    // else to take, the pod's limit OOMs (here: nothing to kill, the charge fails)
    let (mut m, chunks) = legacy_pod(16 * MI, 2.0);
    for i in 0..16 {
        write_chunk(&mut m, chunks, i);
    }
    m.cache.legacy = None;
    assert!(m.charge_object(3, 11, chunks, 16, false).failed);
}

/// The throttle paces the writer at the disk's write rate: under 64 MiB, 1 ns a byte, with
/// nothing in flight at first, every throttle waits for one flusher chunk (4 MiB of device
/// time) and frees that chunk's 4 MiB — so 224 chunks written past the first 64 wait 224 MiB
/// of device time, one throttle each 4 chunks, give or take the chunk in flight at the end.
#[test]
fn legacy_memcg_writer_waits_a_byte_of_writeback_per_byte_written() {
    let (mut m, chunks) = legacy_pod(64 * MI, 1.0);
    let mut waited = 0;
    for i in 0..288 {
        let c = write_chunk(&mut m, chunks, i);
        assert_eq!(c.reclaimed, if i < 64 { 0 } else { MI }, "chunk {i}");
        waited += c.throttle_ns;
    }
    assert!((224 * MI..=228 * MI).contains(&waited), "{} MiB", waited >> 20);
    assert_eq!(m.cache.waits.throttles, waited / (4 * MI));
    assert_eq!(m.cgs[1].usage, 64 * MI);
}

/// Writeback that ends cleans the oldest dirty chunks first (the flusher's order); a chunk
/// reclaim had set aside rotates to the inactive tail (folio_rotate_reclaimable) and goes
/// next, without a wait. What a throttled reclaimer counted written back ahead of the disk
/// is not cleaned twice when the disk reports it.
#[test]
fn written_back_chunks_are_reclaimed_without_a_wait() {
    let (mut m, chunks) = legacy_pod(16 * MI, 2.0);
    for i in 0..16 {
        assert_eq!(write_chunk(&mut m, chunks, i).throttle_ns, 0);
    }
    // nothing in flight: the throttle waits the flusher's first chunk (4 MiB × 2 ns), chunks
    // 0–3 clean when the reclaimer wakes; chunk 0 goes
    assert_eq!(write_chunk(&mut m, chunks, 16).throttle_ns, 8 * MI);
    assert_eq!(m.cache.where_is(chunks, 0), lru::Where::Absent);
    // the disk reports those 4 MiB, then 1 more: only chunk 4 is cleaned by it
    m.cache.written_back(0, 4 * MI);
    assert!(m.cache.is_dirty(chunks, 4));
    m.cache.written_back(0, MI);
    assert!(!m.cache.is_dirty(chunks, 4) && m.cache.is_dirty(chunks, 5));
    m.cache.legacy.as_mut().unwrap().in_flight = None;
    for i in 17..21 {
        assert_eq!(write_chunk(&mut m, chunks, i).throttle_ns, 0, "chunk {i}");
    }
    assert_eq!(m.cache.where_is(chunks, 4), lru::Where::Absent);
    assert_ne!(m.cache.where_is(chunks, 5), lru::Where::Absent);
    assert_eq!(m.cgs[3].file, 16 * MI);
}

/// Reclaim by the page, SWAP_CLUSTER_MAX at a time (issue 17): a1(2) under its own 8 MiB
/// limit holds eight 1 MiB files read once, all inactive, the first read at the tail. One
/// page more is one refused charge: `try_to_free_mem_cgroup_pages(nr_pages = 1)` reclaims
/// max(1, SWAP_CLUSTER_MAX) = 32 pages — of the tail file only (2048 pages scanned
/// `>> priority`: 1 + 2 + 4 + 8 + 16 at priorities 11..7, then the last 1 at 6), which keeps
/// its other 224 pages; the next 31 pages fit without reclaim. A read of the part-evicted
/// file touches its resident pages (read once before: activated) and charges only its 32
/// missing pages — one more round of 32, now from the next file at the inactive tail.
#[test]
fn a_charge_at_the_limit_frees_32_pages_from_the_inactive_tail_not_a_whole_file() {
    const P: u64 = PAGE;
    let mut m = tree(64 * GI);
    m.cgs[2].max = 8 * MI;
    let files = m.cache.register(2, 8, MI);
    for i in 0..8 {
        m.charge_object(2, 10, files, i, true);
    }
    assert_eq!(m.cache.lists(2), (8 * MI, 0));
    let c = m.charge(2, 11, Kind::Anon, P);
    assert_eq!((c.reclaimed, c.reclaim_ns), (32 * P, 32 * 1_000));
    assert_eq!(m.cache.resident_of(files, 0), MI - 32 * P);
    assert_eq!(m.cache.where_is(files, 0), lru::Where::Inactive);
    assert!((1..8).all(|i| m.cache.resident_of(files, i) == MI));
    assert_eq!((m.cgs[2].usage, m.cgs[2].events.max), (8 * MI - 31 * P, 1));
    for _ in 0..31 {
        assert_eq!(m.charge(2, 11, Kind::Anon, P).reclaimed, 0);
    }
    assert_eq!((m.cgs[2].usage, m.cgs[2].events.max), (8 * MI, 1));
    // the part-evicted file read again: 32 pages charged, 32 reclaimed from the next file
    let c = m.charge_object(2, 10, files, 0, true);
    assert_eq!(c.reclaimed, 32 * P);
    assert_eq!(m.cache.resident_of(files, 0), MI);
    assert_eq!(m.cache.where_is(files, 0), lru::Where::Active);
    assert_eq!(m.cache.resident_of(files, 1), MI - 32 * P);
    assert_eq!(m.cgs[2].file, 8 * MI - 32 * P);
}

/// get_scan_count scans each lruvec `size >> priority`, priority from 12 down, and the walk
/// stops once the round has its 32 pages: under pod a(1) at 65 MiB, a1(2)'s 1 MiB list (256
/// pages) is not scanned at priorities 12..9 (256 >> 9 = 0), while a2(3)'s 64 MiB (16384
/// pages) gives 4 + 8 + 16 at priorities 12..10 and the last 4 at 9. So the file read
/// first (a1's) outlives 1 MiB more of a2's reclaim, where a pod-wide LRU would evict it
/// first.
#[test]
fn a_small_list_is_not_scanned_while_a_larger_one_meets_the_round() {
    let mut m = tree(64 * GI);
    m.cgs[1].max = 65 * MI;
    let a1 = m.cache.register(2, 1, MI);
    let a2 = m.cache.register(3, 64, MI);
    m.charge_object(2, 10, a1, 0, true);
    for i in 0..64 {
        m.charge_object(3, 11, a2, i, true);
    }
    assert_eq!(m.cgs[1].usage, 65 * MI);
    let c = m.charge(3, 11, Kind::Anon, PAGE);
    assert_eq!(c.reclaimed, 32 * PAGE);
    assert_eq!((m.cgs[2].file, m.cgs[3].file), (MI, 64 * MI - 32 * PAGE));
    for _ in 0..8 * 32 {
        m.charge(3, 11, Kind::Anon, PAGE);
    }
    // 1 MiB more reclaimed, none of it a1's
    assert_eq!((m.cgs[2].file, m.cgs[3].file), (MI, 63 * MI - 32 * PAGE));
}
