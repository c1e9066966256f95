"""Summary of bench/compare.sh's runs: medians, spreads, ratios and peak RSS per config and peer.

usage: compare_summary.py RUNS.jsonl THREADS PRECISION [JSON_OUT]

RUNS.jsonl holds one object per process run, as `trit bench --json` and bench/pytorch_gpt.py
print them, with "side" (trit or torch) and "round" added. For torch.compile the mode that was
faster in the first round is kept (its rows alone: compare.sh runs only that one afterwards), and
the table names it. The ratio is
trit's median tokens/s over the peer's; the per-round range pairs each round's trit run with the
same round's peer run. Peak RSS is the largest of the rounds.

A trit run whose GEMM peak, measured in the same process before its steps, is below 80% of the
best in this set was slowed by something else on the machine (on 2 cores, one busy core halves
both); it is left out of the medians and listed, unless it is the only run of its config. The
PyTorch side is not judged so: its torch.mm peak moved by 2x between processes whose steps ran
at the same speed (MKL on an AMD CPU), so it does not tell a disturbed run.
"""
import json
import statistics
import sys


def peer_key(row):
    return "trit" if row["side"] == "trit" else row["peer"].split(":")[0]


DISTURBED = 0.8


def drop_disturbed(rows):
    best = max((r["gemm_peak_flops_per_s"] for r in rows if r["side"] == "trit"), default=0.0)
    bad = [r for r in rows if r["side"] == "trit" and r["gemm_peak_flops_per_s"] < DISTURBED * best]
    kept = [r for r in rows if r not in bad]
    for r in bad:  # keep a run that has no undisturbed sibling
        if not any(k["config"] == r["config"] and k["side"] == r["side"] and k.get("peer") == r.get("peer")
                   for k in kept):
            kept.append(r)
    return kept, [r for r in bad if r not in kept]


def summarize(rows):
    groups = {}
    for r in rows:
        groups.setdefault((r["config"], peer_key(r)), []).append(r)
    out = []
    for (config, peer), rs in groups.items():
        if peer == "compile":  # the mode that was faster in the first round, as compare.sh chose
            first = min(r["round"] for r in rs)
            best = min((r for r in rs if r["round"] == first), key=lambda r: r["ms_per_step"])["peer"]
            rs = [r for r in rs if r["peer"] == best]
        ms = [r["ms_per_step"] for r in rs]
        tps = [r["tokens_per_s"] for r in rs]
        s = {"config": config, "peer": peer, "runs": len(rs), "rounds": sorted(r["round"] for r in rs),
             "ms_per_step_median": statistics.median(ms), "ms_per_step_min": min(ms),
             "ms_per_step_max": max(ms), "tokens_per_s_median": statistics.median(tps),
             "mfu_median": statistics.median(r["mfu"] for r in rs),
             "model_flops_per_s_median": statistics.median(r["model_flops_per_s"] for r in rs),
             # trit's MFU is against the machine's FMA peak (trit bench --peak); the peer's own
             # "mfu" is against its torch.mm, so the table puts both against the FMA peak.
             "fma_peak_flops_per_s": max((r.get("fma_peak_flops_per_s") or 0) for r in rs),
             "gemm_peak_flops_per_s_median": statistics.median(r["gemm_peak_flops_per_s"] for r in rs),
             "peak_rss_bytes_max": max(r["peak_rss_bytes"] for r in rs)}
        if peer != "trit":
            for k in ("peer", "torch_version", "torch_blas", "cpu_capability", "attention"):
                s["torch_" + k if k == "peer" else k] = rs[0][k]
            s["compile_s_median"] = statistics.median(r.get("compile_s", 0.0) for r in rs)
        s["_rows"] = rs
        out.append(s)
    by = {(s["config"], s["peer"]): s for s in out}
    for s in out:
        t = by.get((s["config"], "trit"))
        if s["peer"] == "trit" or t is None:
            continue
        s["ratio"] = t["tokens_per_s_median"] / s["tokens_per_s_median"]
        trit_round = {r["round"]: r for r in t["_rows"]}
        per = [trit_round[r["round"]]["tokens_per_s"] / r["tokens_per_s"]
               for r in s["_rows"] if r["round"] in trit_round]
        s["ratio_min"], s["ratio_max"] = min(per), max(per)
    for s in out:
        del s["_rows"]
    return out


def main():
    path = sys.argv[1]
    if path.endswith(".json"):  # a --json-out file: summarize its runs again
        rows = json.load(open(path))["runs"]
    else:
        rows = [json.loads(l) for l in open(path) if l.strip()]
    threads, precision = sys.argv[2], sys.argv[3]
    kept, dropped = drop_disturbed(rows)
    summary = summarize(kept)
    rounds = max(r["round"] for r in rows)
    print(f"\n{precision}, {threads} threads, {rounds} round(s); ratio = trit tokens/s / peer tokens/s "
          "(median; per-round range); ms/step median (min-max); MFU of both = model FLOP/s / the FMA peak "
          "trit bench measured (trit bench --peak); MB = peak RSS")
    head = ("config", "peer", "trit ms", "peer ms", "ratio", "trit MFU", "peer MFU", "trit MB", "peer MB")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    trit = {s["config"]: s for s in summary if s["peer"] == "trit"}
    for s in summary:
        t = trit.get(s["config"])
        if s["peer"] == "trit" or t is None:
            continue
        peer_mfu = (s["model_flops_per_s_median"] / t["fma_peak_flops_per_s"] if t["fma_peak_flops_per_s"]
                    else s["mfu_median"])
        rng = lambda x: f"{x['ms_per_step_median']:.1f} ({x['ms_per_step_min']:.1f}-{x['ms_per_step_max']:.1f})"
        print(f"| {s['config']} | {s['torch_peer']} | {rng(t)} | {rng(s)} | **{s['ratio']:.2f}x** "
              f"({s['ratio_min']:.2f}-{s['ratio_max']:.2f}) | {100 * t['mfu_median']:.1f}% | "
              f"{100 * peer_mfu:.1f}% | {t['peak_rss_bytes_max'] / 1e6:.0f} | "
              f"{s['peak_rss_bytes_max'] / 1e6:.0f} |")
    peers = [s for s in summary if s["peer"] != "trit"]
    if peers:
        p = peers[0]
        print(f"\nPyTorch {p['torch_version']} ({p['torch_blas']}; ATen at {p['cpu_capability']}; "
              f"attention {p['attention']})")
        for s in peers:
            if s["peer"] == "compile":
                print(f"  {s['config']}: {s['torch_peer']} was the faster mode; warmup with "
                      f"compilation {s['compile_s_median']:.0f} s")
    if trit:
        t = next(iter(trit.values()))
        line = f"GEMM peak ({precision}): trit {t['gemm_peak_flops_per_s_median'] / 1e9:.1f} GFLOP/s"
        if peers:
            line += f", torch.mm {peers[0]['gemm_peak_flops_per_s_median'] / 1e9:.1f} GFLOP/s"
        print(line)
    for r in dropped:
        print(f"left out (disturbed): round {r['round']} {r['side']} {r.get('peer', '')} {r['config']}: "
              f"{r['ms_per_step']:.1f} ms/step, GEMM peak {r['gemm_peak_flops_per_s'] / 1e9:.1f} GFLOP/s")
    if len(sys.argv) > 4 and sys.argv[4]:
        with open(sys.argv[4], "w") as f:
            json.dump({"threads": int(threads), "precision": precision, "runs": rows,
                       "left_out": dropped, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
