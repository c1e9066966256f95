"""The table of bench/llama_compare.sh and bench/bitnet_compare.sh from their results file.

  python3 bench/decode_summary.py RESULTS PEER [--decode-tokens N] [--prefill-tokens N]

RESULTS holds "trit ROUND TOKENS JSON" and "peer ROUND FORMAT LABEL JSON" lines (see
bench/decode_common.sh). trit's decode rate is taken from its runs with --tokens N = the decode
count, its prefill rate from those with the prefill count; a peer file of FORMAT is compared with
the trit formats whose blocks are FORMAT (ternary/int4 with ternary), one of FORMAT * with every
trit format. One row per trit format and peer file: medians (min-max) over the rounds, and the
ratios of the medians (trit / peer); --round-ratios adds the range of the ratios of the runs of
one round, which a machine whose speed drifts between rounds moves less than the medians.
"""
import argparse
import json
import statistics


def spread(runs, d=1):
    v = list(runs.values())
    return f"{statistics.median(v):.{d}f} ({min(v):.{d}f}-{max(v):.{d}f})"


def ratio(trit, peer, per_round):
    text = f"{statistics.median(trit.values()) / statistics.median(peer.values()):.2f}x"
    rounds = [trit[r] / peer[r] for r in trit if r in peer]
    if per_round and rounds:
        text += f" ({min(rounds):.2f}-{max(rounds):.2f})"
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("peer", help="the peer's name in the table header")
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--prefill-tokens", type=int, default=128)
    ap.add_argument("--round-ratios", action="store_true")
    a = ap.parse_args()
    pre, dec, peer, labels = {}, {}, {}, []
    for line in open(a.results):
        who, rnd, rest = line.split(" ", 2)
        if who == "trit":
            tokens, js = rest.split(" ", 1)
            r = json.loads(js)
            if int(tokens) == a.prefill_tokens:
                pre.setdefault(r["format"], {})[rnd] = r["prefill_tokens_per_s"]
            if int(tokens) == a.decode_tokens:
                dec.setdefault(r["format"], {})[rnd] = r["decode_tokens_per_s"]
        else:
            fmt, label, js = rest.split(" ", 2)
            if (fmt, label) not in labels:
                labels.append((fmt, label))
            for t in json.loads(js):
                key = (fmt, label, "prefill" if t["n_gen"] == 0 else "decode")
                peer.setdefault(key, {})[rnd] = t["avg_ts"]
    print(f"| trit format | trit prefill | trit decode | {a.peer} file | {a.peer} prefill | "
          f"{a.peer} decode | decode ratio | prefill ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for f in sorted(set(pre) & set(dec)):
        base = f.split("/")[0]
        for fmt, label in labels:
            if fmt not in (base, "*"):
                continue
            lp, ld = peer.get((fmt, label, "prefill")), peer.get((fmt, label, "decode"))
            if not lp or not ld:
                continue
            print(f"| {f} | {spread(pre[f], 0)} | {spread(dec[f])} | {label} | {spread(lp, 0)} | "
                  f"{spread(ld)} | {ratio(dec[f], ld, a.round_ratios)} | {ratio(pre[f], lp, a.round_ratios)} |")


if __name__ == "__main__":
    main()
