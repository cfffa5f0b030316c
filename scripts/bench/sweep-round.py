#!/usr/bin/env python3
"""One round of scripts/bench/conn-sweep.sh, read from what nettrace wrote;
or, with --table, the sweep's rounds as a markdown table.

  sweep-round.py MODE RATE CPS FAILED SECONDS STDOUT STDERR [CPU_S BPF_NS]
                                                               -> one JSON line
  sweep-round.py --table RESULTS                               -> the table

A round's findings: incident 1's fault is snat-missing-on-tunnel on a
connection to 10.96.0.10; every other finding is false (the stream's
connections are healthy; the ones its client saw fail are counted apart).
"""
import json
import re
import statistics
import sys

FAULT_RULE, FAULT_DST = "snat-missing-on-tunnel", "10.96.0.10"


def from_json(stdout):
    summary, fault, false = {}, 0, 0
    for line in open(stdout):
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if o.get("type") == "summary":
            summary = o
        elif o.get("type") == "explanation":
            if o["rule"] == FAULT_RULE and o["flow"]["tuple"]["dst"] == FAULT_DST:
                fault += 1
            else:
                false += 1
    total = lambda k: sum(summary.get(k, {}).values())
    events = total("events")
    records = summary.get("kernel_records") or events  # builds before journeys: a record an event
    return events, records, total("lost"), total("shed"), summary.get("flows_incomplete", 0), fault, false


def from_text(stderr):
    text = open(stderr).read()
    number = lambda pattern: int(m.group(1)) if (m := re.search(pattern, text)) else 0
    events, lost = number(r"nettrace: (\d+) events in"), number(r"; (\d+) lost")
    records = number(r"from (\d+) kernel records") or events
    shed = 0
    if m := re.search(r"shed to keep room for evidence of failure: ([^;\n]*)", text):
        shed = sum(int(n) for n in re.findall(r"\w+ (\d+)", m.group(1)))
    incomplete = number(r"; (\d+) flows incomplete")
    kept, triggered = number(r"kept in the kernel: (\d+) healthy"), number(r"; (\d+) connections showed trouble")
    found = {}
    if m := re.search(r"findings: (.*)$", text, re.M):
        found = {k: int(v) for k, v in re.findall(r"([\w-]+) (\d+)", m.group(1))}
    fault = min(found.pop(FAULT_RULE, 0), 1)
    false = sum(found.values()) + max(0, fault - 1)
    return events, records, lost, shed, incomplete, fault, false, kept, triggered


def round_line(mode, rate, cps, failed, secs, stdout, stderr, cpu_s="0", bpf_ns="0"):
    row = {"mode": mode, "rate": rate, "cps": float(cps), "failed": int(failed)}
    own = mode.removeprefix("base-")  # the baseline build's run of a mode
    parsed = None
    if own in ("json", "json-all", "nomatch"):
        parsed = from_json(stdout) + (0, 0)
    elif own in ("text", "record", "flight", "flight-count", "count"):
        parsed = from_text(stderr)
    conns = float(cps) * float(secs)
    if conns and float(cpu_s) > 0:
        row["cpu_us"] = float(cpu_s) * 1e6 / conns
    if conns and int(bpf_ns) > 0:
        row["bpf_us"] = int(bpf_ns) / 1e3 / conns
    if parsed:
        events, records, lost, shed, incomplete, fault, false, kept, triggered = parsed
        row.update(events=events, per_conn=records / conns if conns else 0,
                   events_per_conn=events / conns if conns else 0, lost=lost, shed=shed,
                   incomplete=incomplete, fault=fault, false=false, kept=kept, triggered=triggered)
    print(json.dumps(row))


def table(results):
    rows = [json.loads(l) for l in open(results)]
    rates = list(dict.fromkeys(r["rate"] for r in rows))
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    print("| rate (conn/s) | mode | conn/s median (min-max) | vs none | records/conn | events/conn | nettrace CPU us/conn | BPF us/conn | kept healthy / shipped on trouble | lost | shed | flows incomplete | fault named | false findings | conns failed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for rate in rates:
        at = [r for r in rows if r["rate"] == rate]
        base = [r["cps"] for r in at if r["mode"] == "none"]
        base = statistics.median(base) if base else 0
        for mode in modes:
            rs = [r for r in at if r["mode"] == mode]
            if not rs:
                continue
            cps = [r["cps"] for r in rs]
            med = statistics.median(cps)
            ratio = f"{med / base:.2f}x" if base else "-"
            cell = lambda k, f="{:.0f}": (f.format(statistics.median([r[k] for r in rs])) if k in rs[0] else "-")
            fault = "-" if "fault" not in rs[0] else "/".join(str(r["fault"]) for r in rs)
            false = "-" if "false" not in rs[0] else str(sum(r["false"] for r in rs))
            gate = "-" if not any(r.get("kept") or r.get("triggered") for r in rs) else f"{cell('kept')} / {cell('triggered')}"
            print(f"| {rate} | {mode} | {med:.0f} ({min(cps):.0f}-{max(cps):.0f}) | {ratio} | {cell('per_conn', '{:.2f}')} | {cell('events_per_conn', '{:.1f}')} "
                  f"| {cell('cpu_us', '{:.1f}')} | {cell('bpf_us', '{:.1f}')} | {gate} | {cell('lost')} | {cell('shed')} | {cell('incomplete')} | {fault} | {false} | {sum(r['failed'] for r in rs)} |")


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        table(sys.argv[2])
    else:
        round_line(*sys.argv[1:10])
