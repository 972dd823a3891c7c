#!/usr/bin/env python3
"""Print the tables of docs/measurements.md from the raw files in docs/results/.

Run from the repository's root: python3 docs/results/summarize.py
Every figure on the page is computed here from the JSON (or, for handoff-1,
the text the tests printed); nothing is typed in by hand.
"""
import json
import re
import statistics
from pathlib import Path

R = Path(__file__).resolve().parent
VARIANTS = ["none", "local-mutex", "setnx", "setnx-expiry", "token", "watchdog",
            "fenced", "redlock", "etcd", "zookeeper", "lua", "lua-batch", "lua-sharded",
            "lua-then-queue", "lua-stream"]


def load(name):
    return json.loads((R / name).read_text())


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def n(x):
    return f"{round(x):,}".replace(",", " ")


def load_run(name):
    runs = {r["variant"]: r for r in load(f"{name}.json")["runs"]}
    rows = []
    for v in VARIANTS:
        if v not in runs:  # a variant newer than the run
            continue
        r = runs[v]
        errors = sum(r["errors"].values())
        lat = r["latency_ms"]
        rows.append([f"`{v}`", r["sold"], r["sold_out"], r["busy"], r["unknown"], errors,
                     n(r["rps"]), f"{lat['p50']:.1f}", f"{lat['p99']:.1f}",
                     r["remaining"], r["oversold"], r["duplicates"], r["verdict"]])
    print(f"## {name}\n")
    print(table(["variant", "sold", "sold out", "busy", "unknown", "errors", "req/s",
                 "p50 ms", "p99 ms", "remaining", "oversold", "duplicates", "verdict"], rows))
    orders = []
    for v in VARIANTS:
        o = runs.get(v, {}).get("orders")
        if o:
            orders.append([f"`{v}`", o["orders"], f"{o['lag_p50_ms']:.1f}",
                           f"{o['lag_p99_ms']:.1f}", n(o["orders_per_s"]), o["verdict"]])
    print()
    print(table(["order variant", "orders", "lag p50 ms", "lag p99 ms", "orders/s",
                 "reconcile"], orders))
    print()


def side_costs(title, sides):
    """The per-answer costs of a bench comparison's sides."""
    rows = []
    for side in sides:
        cpu = {p["kind"]: p["cpu_usec_per_answer"] for p in side["cpu"]["processes"]}
        redis = side.get("redis_usec_per_answer") or side.get("redis_usec_per_call")
        rows.append([side["side"], f"{redis:.1f}" if redis else "-",
                     *(f"{cpu[k]:.1f}" if k in cpu else "-"
                       for k in ("instances", "nginx", "redis", "generator")),
                     f"{side['p99_us']:.0f}" if side.get("p99_us") else "-",
                     side.get("evalsha_calls", "-"), side.get("answers", "-")])
    print(f"\n{title}\n")
    print(table(["side", "Redis µs/answer", "instances CPU µs", "nginx CPU µs",
                 "redis-server CPU µs", "generator CPU µs", "p99 µs", "script calls",
                 "answers"], rows))


def bench_run(name):
    b = load(f"{name}.json")
    print(f"## {name}\n")
    machine = b["machine"]
    if isinstance(machine, dict):
        machine = f"{machine['cores']} cores ({machine['cpu']}), load {machine['load_average_at_start']}"
    print(f"date {b['date']}, machine {machine}, runs per side {b['runs_per_side']}, "
          f"{b['seconds_per_run']} s per run, concurrency {b['concurrency']}\n")
    rows = []
    for r in b["rows"]:
        runs = " / ".join(n(a) for a, _ in r["runs"]) + " vs " + \
            " / ".join(n(t) for _, t in r["runs"])
        sign = "≤" if r.get("goal_at_most") else "≥"
        goal = f"{sign} {r['goal']:.2f}" if r["goal"] is not None else "-"
        unit = "" if r["unit"] == "req/s" else f" {r['unit']}".replace("us", "µs")
        rows.append([f"`{r['row']}`", r["sides"][0], n(r["ours"]) + unit, r["sides"][1],
                     n(r["theirs"]) + unit, f"{r['ratio']:.2f}", goal, runs])
    for s in b["skipped"]:
        rows.append([f"`{s['row']}`", "skipped", "-", "-", "-", "-", "-", s["why"]])
    print(table(["row", "ours", "req/s", "theirs", "req/s", "ratio", "goal",
                 "each run, ours vs theirs (req/s)"], rows))
    for r in b["rows"]:
        m = re.search(r"per answer: ([0-9.]+) us vs ([0-9.]+) us", r["note"] or "")
        if m:
            on, off = float(m.group(1)), float(m.group(2))
            total = sum(p["cpu_usec_per_answer"] for p in b["cpu_during_lua"]["processes"])
            print(f"\ntimeline CPU per answer: {on} vs {off} us, +{on - off:.1f} us, "
                  f"ratio {on / off:.3f}, {(on - off) / total:.1%} of the stack's {total:.1f} us")
        if r["note"]:
            print(f"\nnote {r['row']}: {r['note']}")
    s = b["redis_per_lua_sale"]
    print(f"\nRedis per lua sale: {s['usec_per_call']} us median, runs {s['runs']}, "
          f"{s['evalsha_calls']} EVALSHA calls for {s['lua_answers']} answers")
    c = b["cpu_during_lua"]
    rows = [[p["kind"], f"{p['percent_of_one_core']:.0f} %",
             f"{p['cpu_usec_per_answer']:.1f}"] for p in c["processes"]]
    total = sum(p["cpu_usec_per_answer"] for p in c["processes"])
    rows.append(["all four", "", f"{total:.1f}"])
    rows.append(["everything else", f"{c['everything_else_percent_of_one_core']:.0f} %", ""])
    rows.append(["idle", f"{c['idle_percent_of_one_core']:.0f} %", ""])
    print(f"\nCPU during the lua sides: {c['seconds']:.1f} s, {c['answers']} answers, "
          f"{c['cores']} cores\n")
    print(table(["process", "share of one core", "CPU µs per answer"], rows))
    if b.get("lua_vs_bare"):
        side_costs("the rows against the bare route, per answer:", b["lua_vs_bare"]["sides"])
        for side in b["lua_vs_bare"]["sides"]:
            if "stack_cpu_usec_runs" in side:
                print(f"{side['side']}: instances + Redis CPU per answer, median "
                      f"{side['stack_cpu_usec_per_answer']:.1f} us, runs "
                      + " / ".join(f"{u:.1f}" for u in side["stack_cpu_usec_runs"]))
    if b.get("throughput_not_judged"):
        print(f"\n{b['throughput_not_judged']}")
    lb = b.get("lua_batch")
    if lb:
        side_costs("lua-batch rows, per answer:", lb["sides"])
        if lb.get("p99_ratio") is not None:
            print(f"\np99 lua-batch / lua: {lb['p99_ratio']:.2f}")
        c1 = lb.get("concurrency_1")
        if c1:
            print(f"concurrency 1 median: lua-batch {c1['lua_batch_median_us']:.0f} us, "
                  f"lua {c1['lua_median_us']:.0f} us, difference {c1['difference_us']:+.0f} us")
    for i in b["instances"]:
        print(f"\ninstance {i['instance']}: {i['resident_mib']:.1f} MiB resident")
    print()


def medians(prefix, variants):
    out = {}
    for topo in ("redis", "cluster"):
        files = sorted(R.glob(f"{prefix}-{topo}-*.json"))
        per = {v: [] for v in variants}
        worst = {v: 0 for v in variants}
        for f in files:
            for r in load(f.name)["runs"]:
                per[r["variant"]].append(r["rps"])
                worst[r["variant"]] = max([worst[r["variant"]], r["oversold"]] +
                                          [s["oversold"] for s in r.get("per_sku", [])])
        out[topo] = (len(files), {v: statistics.median(per[v]) for v in variants}, worst, per)
    return out


def scale_1():
    vs = ["lua", "watchdog", "fenced", "redlock"]
    m = medians("scale-1", vs)
    print("## scale-1\n")
    rows = []
    for v in vs:
        one, cl = m["redis"][1][v], m["cluster"][1][v]
        rows.append([f"`{v}`", n(one), n(cl), f"{cl / one:.2f}",
                     max(m["redis"][2][v], m["cluster"][2][v]),
                     " / ".join(n(x) for x in m["redis"][3][v]) + " ; " +
                     " / ".join(n(x) for x in m["cluster"][3][v])])
    print(f"runs: {m['redis'][0]} on one Redis, {m['cluster'][0]} on the cluster\n")
    print(table(["100 SKUs, 20 000 requests", "one Redis req/s", "cluster req/s",
                 "cluster / one", "worst oversold SKU", "runs (one ; cluster)"], rows))
    print()


def hot_1():
    vs = ["lua", "lua-sharded"]
    m = medians("hot-1", vs)
    print("## hot-1\n")
    rows = []
    for topo, name in (("redis", "one Redis"), ("cluster", "3-master cluster")):
        lua, sh = m[topo][1]["lua"], m[topo][1]["lua-sharded"]
        rows.append([name, n(lua), n(sh), f"{sh / lua:.2f}",
                     " / ".join(n(x) for x in m[topo][3]["lua"]) + " ; " +
                     " / ".join(n(x) for x in m[topo][3]["lua-sharded"]),
                     max(m[topo][2].values())])
    one, cl = m["redis"][1]["lua"], m["cluster"][1]["lua"]
    print(f"lua on the cluster / on one Redis: {cl / one:.2f}\n")
    print(table(["one hot SKU, 4 s", "`lua` req/s", "`lua-sharded` req/s", "ratio",
                 "runs (lua ; lua-sharded)", "oversold"], rows))
    print()


def compare_run(name):
    c = load(f"{name}.json")
    print(f"## {name}\n")
    print(f"date {c['date']}, machine {c['machine']}, runs {c['runs']}, "
          f"{c['duration_ms']} ms each, concurrency {c['concurrency']}\n")
    rows = []
    for r in c["rows"]:
        rows.append([r["store"], f"`{r['variant']}`", n(r["pairs_per_s_median"]),
                     n(r["sales_per_s_median"]), f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f}",
                     r["oversold"], r["failover"] or "-",
                     " / ".join(n(x) for x in r["pairs_per_s"]) + " ; " +
                     " / ".join(n(x) for x in r["sales_per_s"])])
    print(table(["store", "variant", "pairs/s", "sales/s", "p50 / p99 ms", "oversold",
                 "failover", "runs (pairs ; sales)"], rows))
    by = {r["store"]: r for r in c["rows"]}
    p = {s: by[s]["pairs_per_s_median"] for s in by}
    s = {s: by[s]["sales_per_s_median"] for s in by}
    print(f"\nredis pairs / zookeeper {p['redis'] / p['zookeeper']:.1f}, "
          f"/ etcd {p['redis'] / p['etcd']:.1f}; zookeeper sales / etcd sales "
          f"{s['zookeeper'] / s['etcd']:.1f}; WAIT keeps {s['redis+wait'] / s['redis']:.0%} "
          f"of the sales/s, p50 +{by['redis+wait']['p50_ms'] - by['redis']['p50_ms']:.1f} ms")
    for r in c["rows"]:
        if r["failover_evidence"]:
            print(f"\nfailover {r['store']}: {r['failover_evidence']}")
    print()


def lab_run(name):
    path = R / f"{name}.json"
    if not path.exists():
        print(f"## {name}\n\n(no {name}.json)\n")
        return
    cells = load(f"{name}.json")["cells"]
    print(f"## {name}\n")
    passed = sum(1 for c in cells if c["pass"])
    scen = sorted({c["scenario"] for c in cells})
    print(f"{len(cells)} cells over {len(scen)} scenarios: {passed} pass, "
          f"{len(cells) - passed} fail")
    rows = []
    for sc in dict.fromkeys(c["scenario"] for c in cells):
        these = [c for c in cells if c["scenario"] == sc]
        rows.append([f"`{sc}`", len(these), sum(1 for c in these if c["pass"])])
    print()
    print(table(["scenario", "cells", "pass"], rows))
    for c in cells:
        if not c["pass"]:
            print(f"FAIL {c['scenario']} {c['variant']}: expected {c['expected']}, "
                  f"observed {c['observed']}: {c['evidence']}")
    print()


def gates_1():
    print("## gates-1\n")
    rows = []
    for v in ["lua", "token", "watchdog"]:
        med, runs = {}, {}
        for b in ["nogates", "gates"]:
            xs = []
            for r in (1, 2, 3):
                xs += [x["rps"] for x in load(f"gates-1-{b}-{r}.json")["runs"] if x["variant"] == v]
            runs[b], med[b] = xs, statistics.median(xs)
        rows.append([f"`{v}`", n(med["nogates"]), n(med["gates"]),
                     f"{med['gates'] / med['nogates']:.2f}",
                     " / ".join(n(x) for x in runs["nogates"]) + " ; " +
                     " / ".join(n(x) for x in runs["gates"])])
    print(table(["protection", "req/s without gates", "req/s with gates", "ratio",
                 "runs (without ; with)"], rows))
    print()


def explore_1(name="explore-1"):
    print(f"## {name}\n")
    run = load(f"{name}.json")
    cells = run["cells"]
    rows = []
    for v in VARIANTS:
        mine = [c for c in cells if c["explored"]["variant"] == v]
        if not mine:
            rows.append([f"`{v}`", 0, "-", "-", "-", "-"])
            continue
        safe = [c for c in mine if not c["counterexample"]]
        found = [c for c in mine if c["counterexample"]]
        rate = statistics.median(c["explored"]["per_second"] for c in mine)
        rows.append([f"`{v}`", len(mine),
                     f"{len(safe)} ({sum(c['explored']['schedules'] for c in safe)} schedules, "
                     f"{sum(c['explored']['found'] is not None for c in safe)} broke)",
                     f"{sum(c['explored']['found'] is not None for c in found)} of {len(found)}",
                     sum(c["explored"]["schedules"] for c in mine), f"{rate:.1f}"])
    print(table(["variant", "cells explored", "safe cells", "counterexample cells found",
                 "schedules", "schedules a second (median of its cells)"], rows))
    print()
    rows = [[f"`{c['explored']['variant']}` in {c['explored']['scenario']}", c["model"],
             c["explored"]["until_found"] or f"not in {c['explored']['schedules']}"]
            for c in cells if c["counterexample"]]
    print(table(["cell", "the checker", "schedules until one broke"], rows))
    print()
    if all("struck" in c["explored"] for c in cells):
        # In how many schedules each fault struck, per cell with faults.
        rows = [[f"`{c['explored']['variant']}` in {c['explored']['scenario']}",
                 c["explored"]["schedules"],
                 ", ".join(f"{k} {n}" for k, n in sorted(c["explored"]["struck"].items())) or "none"]
                for c in cells
                if c["explored"]["scenario"] not in ("one-instance", "race", "retry-storm")]
        print(table(["cell (its scenario has faults)", "schedules", "faults struck (schedules)"], rows))
        print()
    total = sum(c["explored"]["schedules"] for c in cells)
    agree = sum(c["agrees"] for c in cells)
    print(f"{len(cells)} cells explored, {total} schedules, {agree} agreeing with the checker; "
          f"{len(run['not_played'])} cells not played")
    print()


def replay_run(name):
    """The seconds a replay took: every cell's median, and the slowest."""
    cells = load(f"{name}.json")["cells"]
    seconds = [c["seconds"] for c in cells]
    agree = sum(c["agrees"] for c in cells)
    print(f"## {name}\n")
    print(f"{len(cells)} cells replayed, {agree} agreeing; a cell's seconds: "
          f"median {statistics.median(seconds):.1f}, most {max(seconds):.1f}\n")


def soak_run(name):
    """A soak's report (`stocklock soak --json`): faults, variants, recovery."""
    r = load(f"{name}.json")
    struck = sum(r["faults_by_kind"].values())
    print(f"## {name}\n")
    print(f"seed {r['seed']}, {r['minutes']:g} min of faults ({r['elapsed_s']:.0f} s in all), "
          f"{r['requests']} requests, {r['sold']} sold, {struck} faults struck "
          f"({len(r['faults']) - struck} refused), {len(r['violations'])} violations\n")
    print(table(["fault", "struck"], [[k, n] for k, n in sorted(r["faults_by_kind"].items())]))
    print()
    print(table(["variant", "rounds", "requests", "sold", "oversold (claimed)",
                 "deadlocks (claimed)", "SKUs with units lost (claimed)", "violations"],
                [[f"`{v['variant']}`", v["rounds"], v["requests"], v["sold"],
                  v["oversold_allowed"], v["deadlocks_allowed"], v["lost_units_allowed"],
                  v["violations"]] for v in r["variants"]]))
    print()
    u = r["unknowns"]
    print(f"unknowns {u['total']}: sold {u['sold']}, not sold {u['not_sold']}, "
          f"unresolved {u['unresolved']}\n")
    print(table(["after", "measured", "p50 ms", "p99 ms", "max ms"],
                [[x["kind"], x["count"], x["p50_ms"], x["p99_ms"], x["max_ms"]]
                 for x in r["recovery"]]))
    print()
    m = r["redis"]
    print(f"Redis at the end: {m['used_memory_bytes'] / 1048576:.1f} MB, {m['keys']} keys "
          f"(at most {m['keys_allowed']}), {m['locks_left']} locks left\n")


def explore_cells(name):
    """Single cells explored (`explore --variant V --scenario S --json`)."""
    print(f"## {name}\n")
    rows = []
    for f in sorted(R.glob(f"{name}-*.json")):
        c = json.loads(f.read_text())
        rows.append([f"`{c['variant']}` in {c['scenario']}", c["schedules"],
                     ", ".join(f"{k} {n}" for k, n in sorted(c["struck"].items())) or "none",
                     "none" if c["found"] is None else f"schedule {c['until_found']}",
                     f"{c['per_second']:.1f}"])
    print(table(["cell", "schedules", "faults struck (schedules)", "broke",
                 "schedules a second"], rows))
    print()


def handoff_1():
    print("## handoff-1\n")
    for f in sorted(R.glob("handoff-1-*.txt")):
        print(f"{f.name}:")
        for line in f.read_text().splitlines():
            m = re.match(r"test (\S+) \.\.\. (.+)$", line)
            if m and m.group(2) != "ok" and not m.group(2).startswith("[up]"):
                print(f"    {m.group(1)}: {m.group(2)}")
    print()


def build_1():
    """build-1: each build's seconds from nothing, the median of its runs."""
    print("## build-1\n")
    times = {}
    for line in (R / "build-1.txt").read_text().splitlines():
        m = re.match(r"(.+?) #\d+\t([\d.]+) s\t(\d+) rlibs$", line)
        if m:
            times.setdefault(m.group(1), []).append((float(m.group(2)), int(m.group(3))))
    rows = []
    for build, runs in times.items():
        secs = [t for t, _ in runs]
        rows.append([build, len(runs), f"{statistics.median(secs):.1f} s",
                     " / ".join(f"{t:.1f}" for t in secs), runs[0][1]])
    print(table(["build", "runs", "median", "each run", "rlibs built"], rows))
    app = statistics.median(t for t, _ in times["application"])
    for build, runs in times.items():
        if build != "application":
            lib = statistics.median(t for t, _ in runs)
            print(f"{build}: {lib / app:.2f} of the application's time")
    print()


def orders_runs():
    """orders-0 (the baseline) and orders-1 (the two builds alternated)."""
    def row(name):
        r = load(f"{name}.json")["runs"][0]
        o = r["orders"]
        return [name, n(r["rps"]), n(o["orders_per_s"]), f"{o['orders_per_s'] / r['rps']:.2f}",
                f"{o['lag_p50_ms']:.0f}", f"{o['lag_p99_ms']:.0f}", o["verdict"].split(":")[0]]
    groups = [("orders-0", [f"orders-0-{i}" for i in (1, 2, 3)]),
              ("orders-1 base", [f"orders-1-base-{i}" for i in (1, 2, 3)]),
              ("orders-1 new", [f"orders-1-new-{i}" for i in (1, 2, 3)])]
    print("## orders-0 and orders-1\n")
    rows = []
    for title, names in groups:
        runs = [row(x) for x in names if (R / f"{x}.json").exists()]
        rows.extend(runs)
        if runs:
            med = lambda i: statistics.median(float(r[i].replace(" ", "")) for r in runs)
            print(f"{title}: median sales/s {med(1):.0f}, orders/s {med(2):.0f}, "
                  f"ratio {med(2) / med(1):.2f}, lag p50 {med(4):.0f} ms, p99 {med(5):.0f} ms")
    print()
    print(table(["run", "sales/s", "orders/s", "orders / sales", "lag p50 ms", "lag p99 ms",
                 "reconcile"], rows))
    print()


def alloc_3():
    """The instances' CPU per answer with glibc's malloc and with mimalloc."""
    print("## alloc-3\n")
    rows = []
    for build in ("glibc", "mi"):
        for i in (1, 2, 3):
            b = load(f"alloc-3-{build}-{i}.json")
            cpu = {s["side"]: {p["kind"]: p["cpu_usec_per_answer"] for p in s["cpu"]["processes"]}
                   for s in b["lua_vs_bare"]["sides"]}
            rows.append([f"{build}-{i}", *(f"{cpu[side][k]:.1f}" for side in ("lua", "bare", "lua-batch")
                                           for k in ("instances",)),
                         f"{cpu['lua']['nginx']:.1f}",
                         f"{cpu['lua']['instances'] / cpu['lua']['nginx']:.2f}"])
    print(table(["run", "lua: instances µs", "bare: instances µs", "lua-batch: instances µs",
                 "lua: nginx µs", "lua: instances / nginx"], rows))
    for build in ("glibc", "mi"):
        ratios = [float(r[5]) for r in rows if r[0].startswith(build)]
        print(f"{build}: median lua instances / nginx {statistics.median(ratios):.2f}")
    print()


def cuts_1():
    """The CPU rows on the builds before and after the allocation cuts."""
    print("## cuts-1\n")
    rows = []
    for build in ("e868264", "eeab77e"):
        ratios = {"lua-cpu-vs-bare": [], "lua-batch-cpu-vs-bare": []}
        inst = []
        for i in (1, 2, 3):
            b = load(f"cuts-1-{build}-{i}.json")
            for r in b["rows"]:
                ratios[r["row"]].append(r["ratio"])
            lua = b["lua_vs_bare"]["sides"][0]
            inst.append(next(p["cpu_usec_per_answer"] for p in lua["cpu"]["processes"]
                             if p["kind"] == "instances"))
        rows.append([build, *(f"{statistics.median(v):.2f} ({' / '.join(f'{x:.2f}' for x in v)})"
                              for v in ratios.values()),
                     f"{statistics.median(inst):.1f} ({' / '.join(f'{x:.1f}' for x in inst)})"])
    print(table(["build", "lua-cpu-vs-bare", "lua-batch-cpu-vs-bare",
                 "instances CPU µs per lua answer"], rows))
    print()


if __name__ == "__main__":
    bench_run("bench-1")
    scale_1()
    hot_1()
    compare_run("compare-1")
    handoff_1()
    gates_1()
    if (R / "explore-1.json").exists():
        explore_1()
    for later in ("explore-2", "explore-3", "explore-4", "explore-5", "explore-6"):
        if (R / f"{later}.json").exists():
            explore_1(later)
    if list(R.glob("explore-7-*.json")):
        explore_cells("explore-7")
    if (R / "soak-1.json").exists():
        soak_run("soak-1")
    bench_run("bench-2")
    for later in ("replay-1", "replay-2"):
        if (R / f"{later}.json").exists():
            replay_run(later)
    if (R / "orders-0-1.json").exists():
        orders_runs()
    if (R / "build-1.txt").exists():
        build_1()
    if (R / "alloc-3-mi-1.json").exists():
        alloc_3()
    if (R / "cuts-1-eeab77e-1.json").exists():
        cuts_1()
    for later in ("load-2", "bench-3", "bench-5", "bench-6", "lab-2", "lab-3", "lab-4", "lab-5",
                  "compare-2"):
        if (R / f"{later}.json").exists():
            {"load": load_run, "bench": bench_run, "lab": lab_run,
             "compare": compare_run}[later.split("-")[0]](later)
