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

from partitioner.commands.args import positive
from partitioner.commands.io import STDIO, check_one_stdout, check_output, report_stream, write_text, write_via
from partitioner.control.controller import ControlSettings
from partitioner.control.crowds import DeclaredCrowd, parse_crowds
from partitioner.simulate.loop import first_measured
from partitioner.simulate.render import TerminalProgress, summary_line, table
from partitioner.simulate.scenarios import SCENARIOS, SWAP_SHARE, round_cap, scenario
from partitioner.simulate.session import EPOCH0, SimSettings, simulate
from partitioner.simulate.strategies import iso, parse_strategies
from partitioner.simulate.swaps import parse_modes
from partitioner.simulate.timings import measured_swap
from partitioner.simulate.windows import ListSeries, SimulationError, WindowSeries, read_window_dir


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
        settings = SimSettings(args.max_load or sc.max_load, args.window_s or sc.window_s,
                               sc.latency_s if args.latency_s is None else args.latency_s,
                               sc.swap_s if swap_s is None else swap_s, modes)
        return Inputs(f"{sc.name} (seed {args.seed})", sc.description, sc.series, settings, names, control,
                      note or f"the scenario's {sc.swap_s / sc.window_s:g} of a window")
    series = read_window_dir(args.windows)
    for flag, value in (("--max-load", args.max_load), ("--window-s", args.window_s)):
        if value is None:
            hint = f"; e.g. --max-load {suggested_max_load(series):g} (about five workers at the busiest window)" \
                if flag == "--max-load" else ""
            raise SimulationError(f"{flag} is required when WINDOWS is a directory ({args.windows!r}){hint}")
    window_s = float(args.window_s)
    settings = SimSettings(float(args.max_load), window_s, window_s if args.latency_s is None else args.latency_s,
                           SWAP_SHARE * window_s if swap_s is None else swap_s, modes)
    return Inputs(str(args.windows), f"{len(series)} windows from {args.windows}", series, settings, names, control,
                  note or f"default {SWAP_SHARE:g} of a window", series.epoch0)


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
    p.add_argument("--json", metavar="OUT.json", help='write {"strategies": {NAME: {...}}} here')
    p.add_argument("--plot", metavar="OUT.png", help="live workers vs the floor and utilisation, one panel per strategy")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line (drawn on stderr only on a terminal)")
    p.set_defaults(func=run_command)
