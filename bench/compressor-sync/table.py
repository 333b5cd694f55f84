"""bench/compressor-sync/table.py — the table of bench/compressor-sync/run.sh.

    table.py --model M [--plan PLAN.txt] RESULTS.jsonl

One row per implementation: median over the reported steps of the slowest rank's time per
iteration, bytes per rank per iteration (payload from --stats for ours; eth0 from /proc/net/dev
for both), speedup over gloo dense and over torch's counterpart hook, and the issue's target.
"""
import argparse
import json
import re
import statistics

LABEL = {
    "torch-dense": "gloo all_reduce (DDP buckets)",
    "torch-fp16": "torch fp16_compress_hook",
    "torch-powersgd": "torch powerSGD_hook r=4",
    "dense": "ours dense ring (f32)",
    "topk": "ours topk 1% allgather",
    "fp16": "ours fp16 compressed ring",
    "powersgd": "ours PowerSGD r=4",
    "plan": "ours Espresso plan (topk 1%)",
    "topk-fused": "ours topk 1% + Cupcake groups",
    "fp16-fused": "ours fp16 ring + Cupcake groups",
    "plan-fused": "ours Espresso + Cupcake plans",
}
ORDER = ["torch-dense", "dense", "topk", "fp16", "torch-fp16", "powersgd", "torch-powersgd", "plan",
         "topk-fused", "fp16-fused", "plan-fused"]
# ours → (torch counterpart, target over gloo dense, target over counterpart)
TARGET = {"topk": (None, 10, None), "fp16": ("torch-fp16", 1.8, 1.2),
          "powersgd": ("torch-powersgd", None, 1.0), "topk-fused": (None, 10, None),
          "fp16-fused": ("torch-fp16", 1.8, 1.2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--plan")
    ap.add_argument("results")
    a = ap.parse_args()
    rows = {}
    for line in open(a.results):
        d = json.loads(line)
        if d.get("model") != a.model or d.get("warmup"):
            continue
        r = rows.setdefault(d["impl"].replace("torch-", "torch-") if d["impl"].startswith("torch")
                            else d["impl"], {"t": [], "tx": [], "sent": []})
        r["t"].append(max(x["time_s"] for x in d["ranks"]))
        r["tx"].append(statistics.mean(x["tx_bytes"] for x in d["ranks"]))
        if "sent_bytes" in d["ranks"][0]:
            r["sent"].append(statistics.mean(x["sent_bytes"] for x in d["ranks"]))
    t = {k: statistics.median(v["t"]) for k, v in rows.items()}
    base = t.get("torch-dense")
    print(f"\n## {a.model}: time per iteration (all tensors synced), slowest rank, median of "
          f"{min((len(v['t']) for v in rows.values()), default=0)}+ steps")
    print(f"{'implementation':34} {'s/iter':>8} {'eth0 MB/rank':>13} {'payload MB':>11} "
          f"{'vs gloo dense':>14} {'vs torch hook':>14}  target")
    for k in ORDER:
        if k not in rows:
            continue
        r = rows[k]
        tx = statistics.median(r["tx"]) / 1e6
        sent = f"{statistics.median(r['sent']) / 1e6:11.2f}" if r["sent"] else f"{'-':>11}"
        vs = f"{base / t[k]:13.2f}x" if base else f"{'-':>14}"
        cp, tg_d, tg_c = TARGET.get(k, (None, None, None))
        vc = f"{t[cp] / t[k]:13.2f}x" if cp and cp in t else f"{'':>14}"
        tgt = []
        if tg_d and base:
            tgt.append(f">= {tg_d}x gloo: {'met' if base / t[k] >= tg_d else 'NOT met'}")
        if tg_c and cp in t:
            tgt.append(f">= {tg_c}x torch: {'met' if t[cp] / t[k] >= tg_c else 'NOT met'}")
        print(f"{LABEL.get(k, k):34} {t[k]:8.3f} {tx:13.2f} {sent} {vs} {vc}  {'; '.join(tgt)}")
    if a.plan and "plan" in t:
        pred = none = None
        for line in open(a.plan):
            mm = re.match(r"predicted iteration: ([0-9.]+) ms", line)
            if mm:
                pred = float(mm.group(1)) / 1000
            mm = re.match(r"\s*vs none\s+([0-9.]+) ms", line)
            if mm:
                none = float(mm.group(1)) / 1000
        single = {k: t[k] for k in ("dense", "topk", "fp16", "powersgd") if k in t}
        best = min(single, key=single.get) if single else None
        if pred:
            print(f"Espresso plan: predicted iteration {pred:.3f} s (the model's compute included),"
                  f" measured {t['plan']:.3f} s (x{t['plan'] / pred:.1f} the prediction)"
                  + (f"; its no-compression baseline predicted {none:.3f} s, measured (ours dense)"
                     f" {t['dense']:.3f} s" if none and "dense" in t else "")
                  + (f"; best single strategy measured: {best} {single[best]:.3f} s (plan"
                     f" {'at least as fast' if t['plan'] <= single[best] else 'slower'})" if best else ""))
    for k in ("topk", "fp16", "plan"):
        if k in t and k + "-fused" in t:
            print(f"Cupcake groups: {k} {t[k]:.3f} s -> {t[k + '-fused']:.3f} s"
                  f" ({t[k] / t[k + '-fused']:.2f}x)")


if __name__ == "__main__":
    main()
