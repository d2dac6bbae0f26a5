"""``python -m partitioner simulate``: resolve the inputs, run, print, write the JSON and the figure.

Everything a user gives is checked before the first window is simulated (the windows, every
setting, the strategies, ``--policy``, the output paths), so a bad value costs one line on
stderr, exit 2, and nothing written.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

from geokernel.errors import PolicyError
from geokernel.surge.meter import SurgeSettings
from partitioner.commands.args import positive
from partitioner.commands.io import STDIO, check_one_stdout, check_output, report_stream, write_text, write_via
from partitioner.control.controller import ControlSettings
from partitioner.control.crowds import DeclaredCrowd, parse_crowds
from partitioner.simulate.fastpath import DEPLOY_S, SIGNAL_S, FastSettings
from partitioner.simulate.loop import first_measured
from partitioner.simulate.render import TerminalProgress, summary_line, table
from partitioner.simulate.scenarios import SCENARIOS, SWAP_SHARE, round_cap, scenario
from partitioner.simulate.session import EPOCH0, SimSettings, simulate
from partitioner.simulate.strategies import iso, parse_strategies
from partitioner.simulate.swaps import parse_modes
from partitioner.simulate.timings import measured_swap
from partitioner.simulate.windows import CellSeries, ListSeries, SimulationError, WindowSeries, read_window_dir


@dataclass(frozen=True)
class Inputs:
    """The resolved inputs of one run."""

    name: str
    description: str
    series: WindowSeries
    settings: SimSettings
    strategies: tuple[str, ...]
    control: ControlSettings
    swap_note: str = ""
    epoch0: float | None = None  # window 0's start when the windows carry times (file names from ``counts``)


def resolve(args: argparse.Namespace) -> Inputs:
    """Check every input and build the run's settings; raise a ``PartitionerError`` naming a bad one."""
    try:
        modes = parse_modes(args.swap_mode)
    except ValueError as exc:
        raise SimulationError(str(exc)) from None
    control = ControlSettings.from_json(args.policy, where="--policy")
    if args.crowds is not None:
        control = replace(control, crowds=read_crowds(args.crowds))
    names = parse_strategies(args.strategies)
    check_one_stdout(("--json", args.json), ("--plot", args.plot))
    check_output(args.json, "--json", suffix=".json")
    check_output(args.plot, "--plot", suffix=".png")
    measured = None
    if args.swap_timings is not None:
        if args.swap_s is not None:
            raise SimulationError("give --swap-s or --swap-timings, not both")
        measured = measured_swap(args.swap_timings)
    swap_s = measured.swap_s if measured is not None else args.swap_s
    note = measured.describe() if measured is not None else "--swap-s" if args.swap_s is not None else ""
    if args.windows in SCENARIOS:
        sc = scenario(args.windows, args.seed)
        window_s = args.window_s or sc.window_s
        k = ticks_per_window(window_s, args.tick_s)
        series = replace(sc.series, ticks_per_window=k) if isinstance(sc.series, CellSeries) and k > 1 else sc.series
        settings = SimSettings(args.max_load or sc.max_load, window_s,
                               sc.latency_s if args.latency_s is None else args.latency_s,
                               sc.swap_s if swap_s is None else swap_s, modes, fast_settings(args, window_s, k))
        return Inputs(f"{sc.name} (seed {args.seed})", sc.description, series, settings, names, control,
                      note or f"the scenario's {sc.swap_s / sc.window_s:g} of a window")
    k = ticks_per_window(float(args.window_s), args.tick_s) if args.window_s is not None else 1
    series = read_window_dir(args.windows, k)
    for flag, value in (("--max-load", args.max_load), ("--window-s", args.window_s)):
        if value is None:
            hint = f"; e.g. --max-load {suggested_max_load(series):g} (about five workers at the busiest window)" \
                if flag == "--max-load" else ""
            raise SimulationError(f"{flag} is required when WINDOWS is a directory ({args.windows!r}){hint}")
    window_s = float(args.window_s)
    settings = SimSettings(float(args.max_load), window_s, window_s if args.latency_s is None else args.latency_s,
                           SWAP_SHARE * window_s if swap_s is None else swap_s, modes, fast_settings(args, window_s, k))
    return Inputs(str(args.windows), f"{len(series)} windows from {args.windows}", series, settings, names, control,
                  note or f"default {SWAP_SHARE:g} of a window", series.epoch0)


def ticks_per_window(window_s: float, tick_s: float | None) -> int:
    """Ticks per window for ``--tick-s`` (1 without it); a tick that does not divide the window is an error."""
    if tick_s is None:
        return 1
    k = round(window_s / tick_s)
    if k < 1 or abs(k * tick_s - window_s) > 1e-6 * window_s:
        raise SimulationError(f"--tick-s {tick_s:g} must divide the window ({window_s:g} s) into whole ticks")
    return k


def fast_settings(args: argparse.Namespace, window_s: float, ticks: int) -> FastSettings | None:
    """The fast path's settings of ``--fast-path``, ``--surge``, ``--signal-s`` and ``--deploy-s`` (None: off).

    The meter's interval is the tick (``bucket_share`` 1 / ticks per window); its horizon, unless ``--surge`` sets
    ``horizon_s``, a tick plus the relief's latency (``signal_s + deploy_s``).
    """
    if args.fast_path == "off":
        return None
    try:
        surge = SurgeSettings.from_json(args.surge, where="--surge")
    except PolicyError as exc:
        raise SimulationError(str(exc)) from None
    given = set(json.loads(args.surge)) if args.surge and args.surge.strip() else set()
    horizon = surge.horizon_s if "horizon_s" in given else window_s / ticks + args.signal_s + args.deploy_s
    surge = replace(surge, bucket_share=1.0 / ticks, horizon_s=horizon)
    return FastSettings(surge, args.signal_s, args.deploy_s)


def read_crowds(path: str) -> tuple[DeclaredCrowd, ...]:
    """The declared crowds of the file ``path`` (:func:`partitioner.control.crowds.parse_crowds`)."""
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise SimulationError(f"--crowds {path!r}: cannot read ({exc.strerror or exc})") from None
    return parse_crowds(text, f"--crowds {path}")


def suggested_max_load(series: ListSeries) -> float:
    """A cap for a first look at a directory of windows: the busiest window's events / 5, rounded up to 2 digits.

    Notes
    -----
    Only a starting point named in the error for a missing ``--max-load`` (the cap is the user's: what one worker
    processes in one window); at least 1.
    """
    busiest = max((float(c.weights.sum()) for c in series.windows), default=0.0)
    return float(math.ceil(round_cap(max(busiest / 5.0, 1.0))))  # whole events


def run_command(args: argparse.Namespace) -> int:
    """The ``simulate`` command (returns the exit status; library errors propagate to the CLI's handler)."""
    inputs = resolve(args)
    progress = TerminalProgress(quiet=args.quiet)
    try:
        sim = simulate(inputs.series, inputs.settings, inputs.strategies, inputs.control, progress, inputs.epoch0)
    finally:
        progress.clear()
    s = inputs.settings
    out = report_stream(args.json, args.plot)
    print(f"{inputs.name}: {inputs.description}", file=out)
    print(f"max_load {s.max_load:g}, window {s.window_s:g} s, snapshot-to-live latency {s.latency_s:g} s, swap overlap "
          f"{s.swap_s:g} s ({inputs.swap_note}; {', '.join(s.swap_modes)}); {len(inputs.series)} windows, measured "
          f"from window {first_measured(s.window_s, s.latency_s)}; {sim.wall_s:.1f} s", file=out)
    f = s.fast
    print("fast path: off (--fast-path off)" if f is None else
          f"fast path: the router's surge meter every {f.surge.bucket_s(s.window_s):g} s, projecting "
          f"{f.surge.horizon_s:g} s ahead; a signal's relief published {f.signal_s:g} s after it and live "
          f"{f.deploy_s:g} s after that (one deployment at a time, {f.drain_s:g} s drain between)", file=out)
    if inputs.control.crowds:
        epoch0 = EPOCH0 if inputs.epoch0 is None else inputs.epoch0
        clock = "from the windows' file names" if inputs.epoch0 is not None else "the default clock"
        print(f"declared crowds: {len(inputs.control.crowds)} from {args.crowds} (window 0 starts {iso(epoch0)}, "
              f"{clock})", file=out)
    print(table(sim.summaries, s.swap_modes), file=out)
    for name, summary in sim.summaries.items():
        print(summary_line(name, summary, s.swap_modes), file=out)
    if args.json:
        write_text(args.json, json.dumps(sim.to_dict(inputs.name, inputs.description), indent=1) + "\n")
        if args.json != STDIO:
            print(f"wrote {args.json}", file=out)
    if args.plot:
        from partitioner.simulate.figure import plot_simulation

        title = f"{inputs.name}: live workers and utilisation"
        write_via(args.plot, lambda tmp: plot_simulation(sim.summaries, s.window_s, tmp, title=title,
                                                         modes=s.swap_modes), suffix=".png")
        if args.plot != STDIO:
            print(f"wrote {args.plot}", file=out)
    return 0


def non_negative(text: str) -> float:
    """argparse type: a finite number >= 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= v < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return v


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``simulate`` sub-command."""
    p = sub.add_parser("simulate", help="replay windows of load through the control loop",
                       description="Replay windows of load through the control loop: each strategy sees a window "
                                   "once it closed, its specs go live --latency-s later, and every window's true "
                                   "load is applied to the spec live in it. Reports worker-windows against the floor "
                                   "ceil(load / cap), swaps, over-cap worker-windows, utilisation and moved load.")
    p.add_argument("windows", metavar="WINDOWS",
                   help=f"a directory of counts CSVs (quadkey,weight; one per window, file-name order) or a "
                        f"built-in scenario: {', '.join(SCENARIOS)}")
    p.add_argument("--max-load", type=positive, help="cap per worker (a scenario has its own)")
    p.add_argument("--window-s", type=positive, help="window length in seconds (a scenario has its own)")
    p.add_argument("--latency-s", type=non_negative, help="snapshot end -> new spec live, seconds (default one window)")
    p.add_argument("--swap-s", type=non_negative,
                   help=f"overlap of both fleets per swap, seconds (default {SWAP_SHARE:g} of a window: start + "
                        f"warm-up + drain)")
    p.add_argument("--swap-timings", metavar="REPORT.json",
                   help="take the overlap from a local loop's report.json: its measured median process start + "
                        "warm-up + drain (a lower bound for ECS tasks, which start slower than local processes)")
    p.add_argument("--swap-mode", default="both", choices=("whole", "carry", "both"),
                   help="whole-fleet swaps, carry-over swaps (only new slots and moved load), or both (default)")
    p.add_argument("--strategies", default="floor,static,rebuild,reactive,default", metavar="A,B,...",
                   help="any of floor, static, rebuild, reactive, default, counts (default: the first five)")
    p.add_argument("--seed", type=int, default=1, help="random draw of a built-in scenario (default 1)")
    p.add_argument("--policy", metavar="JSON", help="the controller's POLICY_JSON (default: the Lambda's defaults)")
    p.add_argument("--crowds", metavar="FILE.json",
                   help="declared crowds (a JSON list of {name, lat, lon, start, end, load_per_s}): the controller "
                        "sizes for each while it overlaps the next spec's interval; times are those of the windows "
                        "(their file names' starts from `counts`, else window 0 at 2026-06-21T00:00:00Z)")
    p.add_argument("--tick-s", type=positive, metavar="S",
                   help="the router's interval: a directory holds one file per tick of S seconds (window-s / S to a "
                        "window), a scenario is drawn in ticks of S; the fast path counts ticks (default: a window)")
    p.add_argument("--fast-path", choices=("on", "off"), default="on",
                   help="the router's surge meter and the partitioner's relief between windows (default on, as the "
                        "Lambdas run)")
    p.add_argument("--surge", metavar="JSON", help="the surge meter's settings (the router's SURGE_JSON keys)")
    p.add_argument("--signal-s", type=non_negative, default=SIGNAL_S,
                   help=f"a signal to its relief published, seconds (default {SIGNAL_S:g})")
    p.add_argument("--deploy-s", type=non_negative, default=DEPLOY_S,
                   help=f"a spec published to live, seconds (default {DEPLOY_S:g}; a window's spec at most "
                        f"--latency-s)")
    p.add_argument("--json", metavar="OUT.json", help='write {"strategies": {NAME: {...}}} here')
    p.add_argument("--plot", metavar="OUT.png", help="live workers vs the floor and utilisation, one panel per strategy")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line (drawn on stderr only on a terminal)")
    p.set_defaults(func=run_command)
