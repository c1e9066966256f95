#!/usr/bin/env python3
"""Runs the benchmarks the README quotes and writes report.md and report.json.

usage: bench/report.sh [--quick] [--rounds N] [--threads N] [--out DIR] [--data FILE] [--only S,...]

Sections (--only takes their names): machine, gemm, train, decode, qgemm, scaling, quality,
quantize, addition, tokenizer. --quick runs a subset meant for 10 minutes on a 2-core machine:
GEMM peaks, training of baby/small/bpe50k in fp32 and bf16 against PyTorch eager (and
torch.compile on baby), decoding of the main formats, and the baby recipe with post-training
quantization of its checkpoint. The full run adds fp16, the AVX2 kernels, attention scaling,
integer GEMM, every recipe's quality run, the "small" post-training quantization table, the
addition task, the tokenizer against tiktoken, torch.compile on every config and llama.cpp.

Speed figures are taken in alternating rounds (trit, its peer, trit, ...); the report gives the
median and the range (min-max) over the rounds. Loss figures are deterministic (bit-identical for
any thread count) and are run once.

Environment: TRIT (the trit binary, default build/trit), BUILD (build directory, default build),
TRIT_BENCH_VENV / PEER_PYTHON (PyTorch, bench/peer_python.sh), LLAMA_BIN (a directory holding
llama.cpp's llama-bench; decoding is then timed against it), BENCH_WRAP (a command every timed
process runs under, e.g. one that pauses other work on the machine).
"""
import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTIONS = ["machine", "gemm", "train", "decode", "qgemm", "scaling", "quality", "quantize",
            "addition", "tokenizer"]
DECODE_QUICK = "fp32,int8,int4,ternary,ternary/int4"
DECODE_FULL = "fp32,int8,int4,int2,nf4,fp8,fp8-e5m2,ternary,ternary-b3,ternary/int4"
GGUF_TYPES = {"fp32": "f32", "int8": "q8_0", "int4": "q4_0", "ternary": "tq2_0", "ternary-b3": "tq1_0"}
BABY = ["--layers", "4", "--heads", "4", "--dim", "128", "--seq", "64", "--batch", "12", "--lr", "1e-3",
        "--min-lr", "1e-4", "--steps", "2000", "--warmup", "100", "--beta2", "0.99", "--eval-batches", "50"]
# The baby recipe's quality runs: name, flags added to the recipe (the README's tables).
RECIPES = [
    ("fp32", []),
    ("bf16", ["--precision", "bf16"]),
    ("fp16", ["--precision", "fp16"]),
    ("bf16, no master weights, stochastic rounding", ["--precision", "bf16", "--master-weights", "off"]),
    ("bf16, no master weights, nearest rounding",
     ["--precision", "bf16", "--master-weights", "off", "--rounding", "nearest"]),
    ("QAT int4 group 128", ["--qat", "int4"]),
    ("QAT int2 group 64", ["--qat", "int2"]),
    ("ternary, lr 2e-3", ["--ternary", "--lr", "2e-3", "--min-lr", "2e-4"]),
    ("ternary, lr 4e-3", ["--ternary", "--lr", "4e-3", "--min-lr", "4e-4"]),
    ("ternary + SubLN, lr 4e-3", ["--ternary", "--lr", "4e-3", "--min-lr", "4e-4", "--subln"]),
    ("TernGrad", ["--terngrad"]),
    ("TernGrad, no clip", ["--terngrad", "--terngrad-clip", "0"]),
    ("TernGrad, bucket 512", ["--terngrad", "--terngrad-bucket", "512"]),
    ("TernGrad, bucket 128", ["--terngrad", "--terngrad-bucket", "128"]),
]
PTQ_QUICK = [("int8", []), ("int4", []), ("int2", []), ("nf4", []), ("ternary", [])]
PTQ_FULL = [("int8", []), ("fp8", []), ("fp8-e5m2", []), ("int4", []), ("int4", ["--group", "32"]),
            ("nf4", []), ("nf4", ["--double-quant"]), ("int2", []), ("ternary", []), ("ternary-b3", [])]
SMALL_PTQ = ["--layers", "6", "--heads", "6", "--dim", "384", "--seq", "256", "--batch", "16",
             "--dropout", "0.2", "--steps", "600", "--lr", "1e-3", "--min-lr", "1e-4", "--warmup", "100",
             "--beta2", "0.99", "--eval-batches", "20"]


class Report:
    def __init__(self, args):
        self.args = args
        self.wrap = shlex.split(os.environ.get("BENCH_WRAP", ""))
        self.trit = os.environ.get("TRIT", os.path.join(ROOT, "build", "trit"))
        self.build = os.environ.get("BUILD", os.path.join(ROOT, "build"))
        self.tmp = tempfile.mkdtemp(prefix="trit-report-")
        self.t0 = time.perf_counter()
        self.data = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                     "mode": "quick" if args.quick else "full", "rounds": args.rounds,
                     "threads": args.threads, "sections": {}}
        self.md = []
        self.commands = []

    # -- running ---------------------------------------------------------------------------
    def run(self, cmd, timed=True, env=None, check=True, niced=False):
        """Runs cmd (a list), returns (stdout, stderr, seconds). Timed commands run under BENCH_WRAP;
        niced ones (long untimed work) under nice -n 19 when BENCH_WRAP is set (a shared machine)."""
        full = (self.wrap if timed else ["nice", "-n", "19"] if niced and self.wrap else []) + cmd
        shown = " ".join(shlex.quote(c) for c in cmd)
        if env:
            shown = " ".join(f"{k}={v}" for k, v in env.items()) + " " + shown
        print(f"report [{time.perf_counter() - self.t0:.0f} s]: {shown}", file=sys.stderr, flush=True)
        e = dict(os.environ, **(env or {}))
        t0 = time.perf_counter()
        p = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e, cwd=ROOT)
        dt = time.perf_counter() - t0
        if check and p.returncode != 0:
            raise RuntimeError(f"{shown} exited {p.returncode}:\n{p.stderr[-2000:]}")
        return p.stdout, p.stderr, dt

    def note_cmd(self, section, cmd):
        self.commands.append({"section": section, "command": cmd})

    def want(self, name):
        return self.args.only is None or name in self.args.only

    # -- machine ---------------------------------------------------------------------------
    def machine(self):
        info = {}
        cpu = open("/proc/cpuinfo").read()
        field = lambda k: (re.search(rf"^{k}\s*:\s*(.*)$", cpu, re.M) or [None, "?"])[1].strip()
        flags = set(field("flags").split())
        info["cpu_model"] = field("model name")
        info["vendor"] = field("vendor_id")
        info["family"] = int(field("cpu family")) if field("cpu family").isdigit() else None
        info["model"] = int(field("model")) if field("model").isdigit() else None
        info["cores"] = os.cpu_count()
        info["memory_gib"] = round(int(re.search(r"MemTotal:\s*(\d+)", open("/proc/meminfo").read())[1]) / 2**20, 1)
        info["features"] = [f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
                                        "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8") if f in flags]
        info["machine_class"] = machine_class(info, flags)
        info["trit_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.strip()
        out, _, _ = self.run([self.trit, "info", "--cpu"], timed=False)
        info["trit_cpu"] = out.strip()
        info["compiler"] = subprocess.run(["cc", "--version"], text=True, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL).stdout.splitlines()[0]
        info["load_before"] = open("/proc/loadavg").read().split()[:3]
        peers = {}
        py = subprocess.run(["bash", os.path.join(ROOT, "bench", "peer_python.sh")], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.py = py.stdout.strip() if py.returncode == 0 else None
        if self.py:
            out, _, _ = self.run([self.py, os.path.join(ROOT, "bench", "pytorch_gpt.py"), "--info"], timed=False)
            peers["pytorch"] = json.loads(out)
            peers["pytorch"]["python"] = self.py
            peers["pytorch"]["compile"] = self.py != "/usr/bin/python3" or peers["pytorch"][
                "torch_version"].split(".")[0] >= "2"
        else:
            peers["pytorch"] = None
        self.llama = os.environ.get("LLAMA_BIN")
        if self.llama:
            bench = os.path.join(self.llama, "llama-bench")
            if not os.access(bench, os.X_OK):
                raise RuntimeError(f"LLAMA_BIN={self.llama} has no llama-bench")
            v = subprocess.run([bench, "--version"], text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            peers["llama.cpp"] = {"bin": self.llama, "version": v.stdout.strip().splitlines()[:2]}
        else:
            peers["llama.cpp"] = None
        self.data["machine"], self.data["peers"] = info, peers
        self.md += [f"# trit benchmark report ({self.data['mode']})", "",
                    f"- date: {self.data['date']}", f"- machine class: **{info['machine_class']}**",
                    f"- CPU: {info['cpu_model']} (family {info['family']}, model {info['model']}), "
                    f"{info['cores']} cores, {info['memory_gib']} GiB",
                    f"- features: {' '.join(info['features'])}",
                    f"- trit: commit {info['trit_commit']}, {info['compiler']}; `trit info --cpu`: "
                    + info["trit_cpu"].replace("\n", "; "),
                    f"- threads: {self.args.threads}; rounds: {self.args.rounds} (alternating; median and "
                    "min-max over them)", f"- load average before: {' '.join(info['load_before'])}"]
        pt = peers["pytorch"]
        self.md.append("- PyTorch: " + (f"{pt['torch_version']} ({pt['torch_blas']}; ATen at "
                                        f"{pt['cpu_capability']}; {pt['python']})" if pt else "not installed"))
        self.md.append("- llama.cpp: " + (f"{self.llama} ({'; '.join(peers['llama.cpp']['version'])})"
                                          if self.llama else "not measured (LLAMA_BIN unset)"))
        self.md.append("")

    # -- GEMM peaks ------------------------------------------------------------------------
    def gemm(self):
        sec = {"rows": []}
        levels = ["avx512", "avx2"] if "avx512f" in self.data["machine"]["features"] else ["avx2"]
        if self.args.quick:
            levels = levels[:1]
        rates = {}
        # Every training process measures its GEMM peak too, so the quick run takes this table once.
        for r in range(1 if self.args.quick else self.args.rounds):
            for lv in levels:
                cmd = [os.path.join(self.build, "gemm_speed"), lv, str(self.args.threads)]
                out, _, _ = self.run(cmd)
                for m in re.finditer(r"^(\w+)\s+(\w\w)\s+M=\s*(\d+) N=\s*(\d+) K=\s*(\d+)\s+([\d.]+) GFLOP/s", out, re.M):
                    key = (lv, f"{m[1]} {m[2]} {m[3]}x{m[4]}x{m[5]}")
                    rates.setdefault(key, []).append(float(m[6]))
        for lv in levels:
            self.note_cmd("gemm", f"build/gemm_speed {lv} {self.args.threads}")
        sec["rates_gflops"] = {f"{lv} {shape}": v for (lv, shape), v in rates.items()}
        lines = ["## GEMM (f32)", "", f"`build/gemm_speed LEVEL {self.args.threads}`, GFLOP/s, "
                 "median (min-max) over the rounds.", "", "| level | shape | GFLOP/s |", "|---|---|---|"]
        for (lv, shape), v in rates.items():
            lines.append(f"| {lv} | {shape} | {fmt_spread(v)} |")
        for lv in levels:
            best = max(statistics.median(v) for (l, _), v in rates.items() if l == lv)
            sec.setdefault("peak_gflops", {})[lv] = best
            lines.append(f"\nbest median at {lv}: **{best:.1f} GFLOP/s**")
        help_out, help_err, _ = self.run([self.trit, "bench", "--help"], timed=False, check=False)
        if "--peak" in help_out + help_err:  # the machine's FMA and bandwidth limits, where trit has them
            cmd = [self.trit, "bench", "--peak", "--threads", str(self.args.threads), "--json"]
            out, err, _ = self.run(cmd, check=False)
            shown = f"build/trit bench --peak --threads {self.args.threads} --json"
            self.note_cmd("gemm", shown)
            sec["machine_peak"] = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
            lines += ["", f"`{shown}`:", "", "```", (out.strip() or err.strip()), "```"]
        self.data["sections"]["gemm"] = sec
        self.md += lines + [""]

    # -- training against PyTorch ----------------------------------------------------------
    def train(self):
        sec = {}
        lines = ["## Training step (trit bench against bench/pytorch_gpt.py)", ""]
        precisions = ["fp32", "bf16"] if self.args.quick else ["fp32", "bf16", "fp16"]
        levels = [""] if self.args.quick or "avx512f" not in self.data["machine"]["features"] else ["", "avx2"]
        pt = self.data["peers"]["pytorch"]
        for level in levels:
            for prec in precisions:
                # PyTorch held to AVX2 (oneDNN off, as compare.sh --level avx2 does) multiplies bf16
                # through a scalar fallback: 0.75 GFLOP/s against trit's 200 on AMD EPYC Zen 4, hours
                # per config, so there trit's bf16 runs alone, like fp16.
                if prec == "fp16" or not pt or (prec == "bf16" and level == "avx2"):
                    self.train_trit_only(sec, lines, prec, level)
                    continue
                peers = "eager,compile" if pt["compile"] and not level else "eager"
                groups = [("all", peers)]
                if self.args.quick and "compile" in peers:  # compile only on baby in the quick run
                    groups = [("all", "eager"), ("baby", "compile")]
                for config, peer in groups:
                    if peer == "compile" and config == "baby" and self.args.quick:
                        steps, warmup, mode = 10, 3, "max-autotune-no-cudagraphs"
                    else:
                        steps, warmup, mode = (5, 2, "auto") if self.args.quick else (10, 3, "auto")
                    jout = os.path.join(self.tmp, f"cmp-{prec}-{level}-{config}-{peer}.json")
                    cmd = ["bash", "bench/compare.sh", "--config", config, "--steps", str(steps), "--warmup",
                           str(warmup), "--threads", str(self.args.threads), "--precision", prec, "--peer", peer,
                           "--rounds", str(self.args.rounds), "--json-out", jout]
                    if "compile" in peer:
                        cmd += ["--compile-mode", mode]
                    if level:
                        cmd += ["--level", level]
                    out, _, _ = self.run(cmd, timed=False)  # compare.sh wraps each process itself
                    shown = " ".join(c for i, c in enumerate(cmd) if c != "--json-out" and
                                     (i == 0 or cmd[i - 1] != "--json-out"))
                    self.note_cmd("train", shown)
                    res = json.load(open(jout))
                    sec.setdefault(f"{prec}{'-' + level if level else ''}", []).append(
                        {"command": shown, "summary": res["summary"], "runs": res["runs"],
                         "left_out": res.get("left_out", [])})
                    lines += [f"### {prec}{', ' + level + ' kernels on both sides' if level else ''}: "
                              f"{peer.replace(',', ' and ')} on {config}", "", f"`{shown}`", ""]
                    lines += [l for l in out.splitlines() if l.startswith("|") or l.startswith("PyTorch")
                              or l.startswith("GEMM") or "faster mode" in l or l.startswith("left out")] + [""]
        own = self.own_precision_ratios(sec)
        if own:
            lines += ["### trit's 16-bit training against its own fp32", "",
                      "| config | " + " | ".join(f"{p} vs fp32" for p in own) + " |",
                      "|---|" + "---|" * len(own)]
            for c in ("baby", "small", "bpe50k"):
                lines.append(f"| {c} | " + " | ".join(f"{own[p].get(c, 0):.2f}x" for p in own) + " |")
            lines.append("")
            sec["own_fp32_ratios"] = own
        self.data["sections"]["train"] = sec
        self.md += lines

    @staticmethod
    def own_precision_ratios(sec):
        """trit's median ms/step in fp32 over its median in each 16-bit precision, per config."""
        def medians(key):
            ms = {}
            for block in sec.get(key, []):
                for r in block["runs"]:
                    if r.get("side", "trit") == "trit" and r not in block.get("left_out", []):
                        ms.setdefault(r["config"], []).append(r["ms_per_step"])
            return {c: statistics.median(v) for c, v in ms.items()}
        base = medians("fp32")
        out = {}
        for p in ("bf16", "fp16"):
            m = medians(p)
            if base and m:
                out[p] = {c: base[c] / m[c] for c in m if c in base}
        return out

    def train_trit_only(self, sec, lines, prec, level):
        steps, warmup = (6, 2) if self.args.quick else (10, 3)
        rows = []
        env = {"TRIT_CPU": level} if level else None
        for r in range(self.args.rounds):
            for c in ("baby", "small", "bpe50k"):
                cmd = [self.trit, "bench", "--json", "--config", c, "--steps", str(steps), "--warmup", str(warmup),
                       "--threads", str(self.args.threads), "--precision", prec]
                out, _, _ = self.run(cmd, env=env)
                rows.append(dict(json.loads(out.strip().splitlines()[-1]), round=r + 1))
        shown = f"{'TRIT_CPU=' + level + ' ' if level else ''}build/trit bench --json --config C --steps {steps} " \
                f"--warmup {warmup} --threads {self.args.threads} --precision {prec}"
        self.note_cmd("train", shown)
        sec[f"{prec}{'-' + level if level else ''}"] = [{"command": shown, "runs": rows}]
        lines += [f"### {prec}{', ' + level + ' kernels' if level else ''}: trit only", "", f"`{shown}`", "",
                  "| config | ms/step | MFU | peak RSS MB |", "|---|---|---|---|"]
        for c in ("baby", "small", "bpe50k"):
            rs = [r for r in rows if r["config"] == c]
            lines.append(f"| {c} | {fmt_spread([r['ms_per_step'] for r in rs])} | "
                         f"{100 * statistics.median(r['mfu'] for r in rs):.1f}% | "
                         f"{max(r['peak_rss_bytes'] for r in rs) / 1e6:.0f} |")
        lines.append("")

    # -- decoding --------------------------------------------------------------------------
    def decode(self):
        formats = DECODE_QUICK if self.args.quick else DECODE_FULL
        levels = [""] if self.args.quick or "avx512f" not in self.data["machine"]["features"] else ["", "avx2"]
        sec, lines = {}, ["## Decoding (batch 1, gpt2 shape: L=12 C=768 V=50257, random weights)", ""]
        ggufs = {}
        if self.llama:
            for f in formats.split(","):
                if f in GGUF_TYPES:
                    path = os.path.join(self.tmp, f"gpt2-{GGUF_TYPES[f]}.gguf")
                    self.run([self.trit, "export", "--random", "gpt2", "--format", "gguf", "--type",
                              GGUF_TYPES[f], "--out", path], timed=False)
                    ggufs[f] = path
            self.note_cmd("decode", "build/trit export --random gpt2 --format gguf --type T --out gpt2-T.gguf")
        for level in levels:
            env = {"TRIT_CPU": level} if level else None
            trit_rows, llama_rows = [], []
            cmd = [self.trit, "bench", "--decode", "--config", "gpt2", "--format", formats, "--kv-cache", "f16",
                   "--threads", str(self.args.threads), "--json"]
            for r in range(self.args.rounds):
                out, _, _ = self.run(cmd, env=env)
                trit_rows += [dict(json.loads(l), round=r + 1) for l in out.splitlines() if l.startswith("{")]
                if not level:
                    for f, path in ggufs.items():
                        lb = [os.path.join(self.llama, "llama-bench"), "-m", path, "-p", "128", "-n", "128",
                              "-t", str(self.args.threads), "-r", "3", "-o", "json"]
                        out, _, _ = self.run(lb)
                        for t in json.loads(out):
                            llama_rows.append({"format": f, "round": r + 1, "n_prompt": t["n_prompt"],
                                               "n_gen": t["n_gen"], "tokens_per_s": t["avg_ts"]})
            shown = ("TRIT_CPU=" + level + " " if level else "") + " ".join(["build/trit"] + cmd[1:])
            self.note_cmd("decode", shown)
            if ggufs and not level:
                self.note_cmd("decode", f"LLAMA_BIN/llama-bench -m gpt2-T.gguf -p 128 -n 128 -t "
                                        f"{self.args.threads} -r 3 -o json")
            sec[level or "native"] = {"command": shown, "trit": trit_rows, "llama.cpp": llama_rows}
            lines += [f"`{shown}`" + (" alternating with `llama-bench -p 128 -n 128 -r 3` on "
                                      "`trit export --random gpt2 --format gguf --type T`" if llama_rows else ""),
                      "", "| format | prefill t/s | decode t/s | weights MB | peak RSS MB |"
                      + (" llama.cpp prefill | llama.cpp decode | decode ratio | prefill ratio |" if llama_rows else ""),
                      "|---|---|---|---|---|" + ("---|---|---|---|" if llama_rows else "")]
            for f in formats.split(","):
                rs = [r for r in trit_rows if r["format"] == f or r["format"].startswith(f + "/") and "/" not in f]
                rs = [r for r in trit_rows if r["format"] == f] or rs
                if not rs:
                    continue
                pre = [r["prefill_tokens_per_s"] for r in rs]
                dec = [r["decode_tokens_per_s"] for r in rs]
                row = (f"| {rs[0]['format']} | {fmt_spread(pre, 0)} | {fmt_spread(dec)} | "
                       f"{rs[0]['weight_bytes'] / 1e6:.1f} | {max(r['peak_rss_bytes'] for r in rs) / 1e6:.0f} |")
                if llama_rows:
                    lp = [r["tokens_per_s"] for r in llama_rows if r["format"] == f and r["n_gen"] == 0]
                    ld = [r["tokens_per_s"] for r in llama_rows if r["format"] == f and r["n_prompt"] == 0]
                    row += (f" {fmt_spread(lp, 0)} | {fmt_spread(ld)} | {statistics.median(dec) / statistics.median(ld):.2f}x"
                            f" | {statistics.median(pre) / statistics.median(lp):.2f}x |" if lp and ld else " | | | |")
                lines.append(row)
            lines.append("")
        self.data["sections"]["decode"] = sec
        self.md += lines

    # -- integer GEMM, attention scaling ---------------------------------------------------
    def raw_section(self, name, title, cmds):
        sec, lines = [], [f"## {title}", ""]
        for cmd, env in cmds:
            outs = []
            for _ in range(self.args.rounds if name != "scaling" else 1):
                out, _, _ = self.run(cmd, env=env)
                outs.append(out)
            shown = ("".join(f"{k}={v} " for k, v in (env or {}).items()) + " ".join(
                [os.path.relpath(cmd[0], ROOT)] + cmd[1:]))
            self.note_cmd(name, shown)
            sec.append({"command": shown, "outputs": outs})
            lines += [f"`{shown}` (last of {len(outs)} runs):", "", "```", outs[-1].strip(), "```", ""]
        self.data["sections"][name] = sec
        self.md += lines

    # -- quality ---------------------------------------------------------------------------
    def train_run(self, flags, out_dir, data, timed):
        """A training run's final val loss and wall time. Losses do not depend on what else runs on
        the machine, so only a run whose wall time is quoted runs under BENCH_WRAP."""
        cmd = [self.trit, "train", "--data", data] + flags + ["--threads", str(self.args.threads), "--out",
                                                               out_dir, "--quiet", "1", "--sample-tokens", "0"]
        _, _, dt = self.run(cmd, timed=timed, niced=not timed)
        val = None
        for l in open(os.path.join(out_dir, "metrics.jsonl")):
            m = json.loads(l)
            if m.get("val_loss") is not None:
                val = m["val_loss"]
        return val, dt

    def quality(self):
        data = self.args.data
        if not os.path.exists(data):
            self.md += ["## Quality", "", f"skipped: no corpus at {data} (tinyshakespeare, the 1.1 MB text of "
                        "Karpathy's char-rnn; any text file works: --data FILE)", ""]
            return
        recipes = RECIPES[:1] if self.args.quick else RECIPES
        sec, lines = [], ["## Quality: the baby recipe (2000 steps, val loss over 50 batches of 12 x 64)", "",
                          "`build/trit train --data DATA " + " ".join(BABY) + f" --threads {self.args.threads} "
                          "FLAGS` (wall time timed for fp32 only)", "",
                          "| model | flags | val loss | vs fp32 | wall s |", "|---|---|---|---|---|"]
        base = None
        for name, flags in recipes:
            out_dir = os.path.join(self.tmp, "baby-" + re.sub(r"\W+", "-", name))
            val, dt = self.train_run(BABY + flags, out_dir, data, timed=name == "fp32")
            if name == "fp32":
                base, self.baby_run = val, out_dir
            sec.append({"name": name, "flags": flags, "val_loss": val, "wall_s": round(dt, 1)})
            lines.append(f"| {name} | {'`' + ' '.join(flags) + '`' if flags else '(none)'} | {val:.4f} | "
                         f"{pct(val, base)} | {f'{dt:.0f}' if name == 'fp32' else ''} |")
            if flags and flags[0] == "--qat":  # frozen with trit quantize, as the README's table
                fmt = flags[1]
                q = self.quantize(out_dir, fmt, [], data)
                sec.append({"name": name + ", frozen", "val_loss": q})
                lines.append(f"| {name}, frozen | `trit quantize --format {fmt}` | {q:.4f} | {pct(q, base)} | |")
        self.note_cmd("quality", "build/trit train --data DATA " + " ".join(BABY) + " [FLAGS]")
        lines.append("")
        lines += ["### Post-training quantization of the fp32 baby checkpoint", "",
                  "`build/trit quantize RUN --format F [FLAGS] --batches 50 --batch 12`", "",
                  "| format | val loss | vs fp32 |", "|---|---|---|"]
        for fmt, flags in (PTQ_QUICK if self.args.quick else PTQ_FULL):
            q = self.quantize(self.baby_run, fmt, flags, data, batches=50, batch=12)
            sec.append({"name": f"PTQ {fmt} {' '.join(flags)}".strip(), "val_loss": q})
            lines.append(f"| {' '.join([fmt] + flags)} | {q:.4f} | {pct(q, base)} |")
        self.note_cmd("quality", "build/trit quantize RUN --format F [FLAGS] --batches 50 --batch 12")
        self.data["sections"]["quality"] = sec
        self.md += lines + [""]

    def quantize(self, run, fmt, flags, data, batches=50, batch=12):
        out_dir = os.path.join(self.tmp, os.path.basename(run) + "-" + fmt + "".join(flags).replace("-", "_"))
        out, _, _ = self.run([self.trit, "quantize", run, "--format", fmt] + flags +
                             ["--out", out_dir, "--batches", str(batches), "--batch", str(batch),
                              "--threads", str(self.args.threads)], timed=False, niced=True)
        m = re.search(r"val loss:\s+before ([\d.]+) -> .*? ([\d.]+) \(", out)
        if not m:
            raise RuntimeError(f"trit quantize printed no val loss:\n{out}")
        self.last_before = float(m[1])  # the fp32 model's loss on the same windows
        return float(m[2])

    def quantize_small(self):
        data = self.args.data
        if not os.path.exists(data):
            return
        run = os.path.join(self.tmp, "small-ptq")
        val, dt = self.train_run(SMALL_PTQ, run, data, timed=False)
        shown = "build/trit train --data DATA " + " ".join(SMALL_PTQ) + f" --threads {self.args.threads}"
        self.note_cmd("quantize", shown)
        # The run's own val loss is over its eval batches of 16; the formats are compared on
        # quantize's 20 batches of 8, against the fp32 model's loss on those same windows.
        rows = []
        for fmt, flags in PTQ_FULL:
            rows.append((fmt, flags, self.quantize(run, fmt, flags, data, batches=20, batch=8)))
        base = self.last_before
        sec = {"command": shown, "fp32": base, "fp32_run_val": val, "wall_s": dt, "formats": []}
        lines = ["## Post-training quantization of a \"small\" model", "", f"`{shown}` then "
                 "`build/trit quantize RUN --format F [FLAGS]` (20 batches of 8 x 256)", "",
                 "| format | val loss | change |", "|---|---|---|", f"| fp32 | {base:.4f} | |"]
        for fmt, flags, q in rows:
            sec["formats"].append({"format": fmt, "flags": flags, "val_loss": q})
            lines.append(f"| {' '.join([fmt] + flags)} | {q:.4f} | {pct(q, base)} |")
        self.data["sections"]["quantize"] = sec
        self.md += lines + [""]

    def addition(self):
        out_dir = os.path.join(self.tmp, "addition")
        out, err, dt = self.run([self.trit, "train", "--out", out_dir, "--threads", str(self.args.threads)])
        acc = re.findall(r"exact match ([\d.]+)%", out + err)
        self.note_cmd("addition", f"build/trit train --threads {self.args.threads}")
        self.data["sections"]["addition"] = {"wall_s": round(dt, 1), "accuracy": acc[-1] if acc else None}
        self.md += ["## The addition task", "", f"`build/trit train --threads {self.args.threads}`: "
                    f"{dt:.0f} s wall, last accuracy {acc[-1] + '%' if acc else '?'}", ""]

    def tokenizer(self):
        gpt2 = os.path.join(os.path.dirname(self.args.data), "gpt2")
        has = self.py and subprocess.run([self.py, "-c", "import tiktoken"], stderr=subprocess.DEVNULL).returncode == 0
        if not os.path.isdir(gpt2) or not has:
            self.md += ["## GPT-2 tokenizer against tiktoken", "", f"skipped: needs GPT-2's files in {gpt2} and "
                        "tiktoken in the PyTorch environment (pip install tiktoken)", ""]
            return
        rounds = str(max(3, self.args.rounds))
        out, _, _ = self.run(["bash", "bench/tokenizer_gpt2.sh", rounds, self.args.data, gpt2], env={"PYTHON": self.py})
        self.note_cmd("tokenizer", f"PYTHON={self.py} bash bench/tokenizer_gpt2.sh {rounds} DATA GPT2_DIR")
        self.data["sections"]["tokenizer"] = {"output": out}
        self.md += ["## GPT-2 tokenizer against tiktoken", "", "```", out.strip(), "```", ""]

    # -- all -------------------------------------------------------------------------------
    def go(self):
        t0 = self.t0
        self.machine()
        q = self.args.quick
        if self.want("gemm"):
            self.gemm()
        if self.want("train"):
            self.train()
        if self.want("decode"):
            self.decode()
        if self.want("qgemm") and not q:
            lv = ["avx512", "avx2"] if "avx512f" in self.data["machine"]["features"] else ["avx2"]
            self.raw_section("qgemm", "Integer GEMM", [([os.path.join(self.build, "qgemm_speed"), l,
                                                           str(self.args.threads)], None) for l in lv])
        if self.want("scaling") and not q:
            self.raw_section("scaling", "Attention scaling (baby model, 8192 tokens per step)",
                             [([self.trit, "bench", "--scaling", "--threads", str(self.args.threads)], None)])
        if self.want("quality"):
            self.quality()
        if self.want("quantize") and not q:
            self.quantize_small()
        if self.want("addition") and not q:
            self.addition()
        if self.want("tokenizer") and not q:
            self.tokenizer()
        self.data["load_after"] = open("/proc/loadavg").read().split()[:3]
        self.data["wall_s"] = round(time.perf_counter() - t0, 1)
        self.data["commands"] = self.commands
        self.md += ["## Commands", ""] + [f"- {c['section']}: `{c['command']}`" for c in self.commands]
        self.md += ["", f"Load average after: {' '.join(self.data['load_after'])}; the report took "
                    f"{self.data['wall_s']:.0f} s."]
        os.makedirs(self.args.out, exist_ok=True)
        with open(os.path.join(self.args.out, "report.json"), "w") as f:
            json.dump(self.data, f, indent=1)
        with open(os.path.join(self.args.out, "report.md"), "w") as f:
            f.write("\n".join(self.md) + "\n")
        print(f"report: wrote {self.args.out}/report.md and report.json in {self.data['wall_s']:.0f} s",
              file=sys.stderr)


def machine_class(info, flags):
    """A name for the CPU generation, as the README labels figures: 'AMD EPYC Zen 4' etc."""
    fam, model, name = info["family"], info["model"] or 0, info["cpu_model"]
    if info["vendor"] == "AuthenticAMD":
        line = "AMD EPYC" if "EPYC" in name else "AMD Ryzen" if "Ryzen" in name else "AMD"
        if fam == 25:
            zen = "Zen 4" if (0x10 <= model <= 0x1f or 0x60 <= model <= 0x7f or 0xa0 <= model <= 0xaf) else "Zen 3"
        elif fam == 26:
            zen = "Zen 5"
        elif fam == 23:
            zen = "Zen 2" if model >= 0x30 else "Zen"
        else:
            zen = f"family {fam}"
        return f"{line} {zen}"
    if info["vendor"] == "GenuineIntel":
        return name + (" (AMX)" if "amx_tile" in flags else "")
    return name


def fmt_spread(v, digits=1):
    if not v:
        return "-"
    med = statistics.median(v)
    if len(v) == 1:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({min(v):.{digits}f}-{max(v):.{digits}f})"


def pct(v, base):
    return "" if base is None or v == base else f"{100 * (v - base) / base:+.2f}%"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a subset meant for about 10 minutes")
    ap.add_argument("--rounds", type=int, default=None, help="alternating rounds (quick 2, full 3)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "report"))
    ap.add_argument("--data", default=os.path.join(os.path.dirname(ROOT), "shared", "data", "tinyshakespeare.txt"))
    ap.add_argument("--only", default=None, help="comma list of sections: " + ",".join(SECTIONS))
    args = ap.parse_args()
    args.rounds = args.rounds or (2 if args.quick else 3)
    if args.rounds < 1 or args.threads < 1:
        ap.error("--rounds and --threads must be at least 1")
    if args.only is not None:
        args.only = set(args.only.split(","))
        bad = args.only - set(SECTIONS)
        if bad:
            ap.error(f"unknown section(s) {', '.join(sorted(bad))}: use {', '.join(SECTIONS)}")
    rep = Report(args)
    if not os.access(rep.trit, os.X_OK):
        ap.error(f"no trit binary at {rep.trit}: build first, or set TRIT=path/to/trit")
    try:
        rep.go()
    except RuntimeError as e:
        print(f"report: {e}", file=sys.stderr)
        sys.exit(1)
    finally:  # the runs, checkpoints and GGUF files made on the way
        shutil.rmtree(rep.tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
