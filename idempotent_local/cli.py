"""The local cloud: idempotent-pipeline local COMMAND (or: python -m idempotent_local COMMAND).

deploy   start (or reuse) the app's emulator, bootstrap, cdk deploy the app (--demo: then run the demo)
run      poll every deployed event source mapping and run the functions until Ctrl-C
demo     publish sample traffic through the deployed pipeline, drain it through the runner, report
diff     cdk diff the app against what is deployed in its emulator
status   is the app's emulator running, and what is deployed in it
output   print one stack output's value, for scripts: TOPIC_ARN=$(... output TopicArn)
env      print the variables that point the AWS CLI / SDKs at the emulator: eval "$(... env)"; --unset undoes
age      make time pass for the emulator: stream records (kept 24 h) and FIFO deduplication ids (5 min) age
         (also: age-streams, age-dedup)
request  send an HTTP request to a deployed REST API: its Lambda proxy integration runs the function
destroy  cdk destroy the app, then stop its emulator
serve    run the emulator in the foreground until Ctrl-C (deploy starts it in the background)
stop     stop the emulator

Each app has its own emulator, with its state in <app dir>/.local-cloud/. The app is --app-dir, else the
nearest directory holding a cdk.json, from the working directory up.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import sys
import threading
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from idempotent_local import emulator as emulators
from idempotent_local.errors import LocalCloudError
from idempotent_local.extra import MissingExtra, require_moto
from idempotent_local.location import Location, NoApp, locate
from idempotent_local.node import BANNER_VARIABLES, quiet_environment

ALIAS_PROG = "python -m idempotent_local"
MAKE_TARGETS = ("deploy", "demo", "destroy")


class Progress:
    """One line per step, and the step's own time when it is done."""

    def __init__(self, total: int) -> None:
        self.total, self.step, self.started = total, 0, time.monotonic()

    def __call__(self, text: str) -> None:
        self.step += 1
        self.started = time.monotonic()
        print(f"==> [{self.step}/{self.total}] {text}", flush=True)

    def done(self, text: str) -> None:
        print(f"    {text} ({time.monotonic() - self.started:.1f} s)", flush=True)


def _say(text: str) -> None:
    print(f"    {text}", flush=True)


def _location(args: argparse.Namespace) -> Location:
    return locate(getattr(args, "app_dir", None), args.state_dir)


def _hint(args: argparse.Namespace, location: Location, command: str) -> str:
    """How the user runs ``command`` next: the make target when this run came from the app's Makefile."""
    if os.environ.get("MAKELEVEL") and command in MAKE_TARGETS and location.app_dir is not None:
        try:
            makefile = (location.app_dir / "Makefile").read_text()
        except OSError:
            makefile = ""
        if re.search(rf"^{command}:", makefile, re.MULTILINE):
            return f"make {command}"
    return f"{args.prog_name} {command}"


def _running(args: argparse.Namespace, location: Location) -> emulators.Emulator:
    emulator = emulators.find(location.state_dir)
    if emulator is None:
        raise emulators.EmulatorError(
            f"no emulator is running for {location.describe()} (state in {location.state_dir}/); "
            f"start it with `{_hint(args, location, 'deploy')}`"
        )
    return emulator


def _context(args: argparse.Namespace) -> list[str]:
    extra: list[str] = []
    for pair in args.context or []:
        extra += ["--context", pair]
    return extra


def _cdk(args: argparse.Namespace, emulator: emulators.Emulator, location: Location) -> Any:
    from idempotent_local.cdk import Cdk

    return Cdk(emulator, location.app_dir or ".", output=args.output, stream=args.verbose, announce=_say)


def cmd_deploy(args: argparse.Namespace) -> int:
    from idempotent_local.cdk import synth_warnings
    from idempotent_local.mappings import plural
    from idempotent_local.stacks import deployed_stacks

    location = _location(args)
    if location.app_dir is None:
        raise NoApp("deploy needs an app: run it in the app's directory or pass --app-dir DIR")
    progress = Progress(5 if args.demo else 4)
    progress("starting the local AWS emulator (moto, loopback only)")
    emulator, started = emulators.start(location.state_dir)
    args._started = started
    progress.done(
        f"{'started' if started else 'reused'} on {emulator.endpoint}, pid {emulator.pid}, "
        f"state in {location.state_dir}/"
    )
    cdk = _cdk(args, emulator, location)
    progress(f"bootstrapping aws://{emulators.ACCOUNT_ID}/{emulators.REGION} (cdk bootstrap)")
    if cdk.is_bootstrapped():
        progress.done("already bootstrapped")
    else:
        cdk.bootstrap()
        progress.done("bootstrapped")
    progress(f"deploying {' '.join(args.stacks) or 'every stack'} of {cdk.app_dir} (cdk deploy)")
    warnings = synth_warnings(cdk.deploy(args.stacks, _context(args)))
    progress.done("deployed")
    if warnings:
        print(f"    {plural(len(warnings), 'synth warning')} (the CLI's output: {cdk.log_path('deploy')}):")
        for warning in warnings:
            print(f"    warning: {warning}")
    progress("checking that every resource of the templates exists in the emulator")
    problems = _print_stacks(deployed_stacks(emulator), "    ")
    if problems:
        print(f"    {problems} resource(s) missing: the pipeline is not wired as the template says")
    if args.demo:
        from idempotent_local.demo import run_demo

        progress("running the pipeline: publish sample traffic, drain it through the event-source runner")
        report = run_demo(emulator, with_processor=False)
        print("\n".join("    " + line for line in report.render().splitlines()), flush=True)
        if not report.balanced:
            return 1
        then = (_hint(args, location, "demo"), "runs the sample traffic again")
    else:
        then = (_hint(args, location, "run"), "runs your functions on the messages you publish")
    steps = [
        then,
        (f'eval "$({args.prog_name} env)"', "points the AWS CLI and SDKs at the emulator"),
        (_hint(args, location, "destroy"), "removes the stacks and stops the emulator"),
    ]
    width = max(len(command) for command, _ in steps)
    print(f"\nThe emulator keeps running on {emulator.endpoint} for {location.describe()}:")
    for command, meaning in steps:
        print(f"    {command.ljust(width)}   {meaning}")
    return 1 if problems else 0


def _print_stacks(stacks: list[Any], indent: str, detail: bool = False) -> int:
    """Each stack's status and resources, what is missing from it (the number returned) and the emulator's
    notes; with ``detail``, a failed operation's reason and the outputs (not the bootstrap stack's)."""
    from idempotent_local.cdk import BOOTSTRAP_STACK

    problems = 0
    for stack in stacks:
        print(f"{indent}{stack.name}: {stack.status}, {stack.resources} resources")
        if detail and stack.status_reason:
            print(f"    ({stack.status_reason})")
        for problem in stack.problems():
            problems += 1
            print(f"    ! {problem}")
        for note in stack.notes:
            print(f"    note: {note}")
        if detail and stack.name != BOOTSTRAP_STACK:
            for name, value in sorted(stack.outputs.items()):
                print(f"    {name} = {value}")
    return problems


def cmd_destroy(args: argparse.Namespace) -> int:
    from idempotent_local.stacks import deployed_stacks

    location = _location(args)
    emulator = emulators.find(location.state_dir)
    if emulator is None:
        print(f"==> no emulator is running for {location.describe()}: nothing to destroy")
        return 0
    progress = Progress(1 if args.keep_emulator else 2)
    progress(f"destroying the stacks of {location.describe()} (cdk destroy)")
    _cdk(args, emulator, location).destroy(args.stacks, _context(args))
    left = [s.name for s in deployed_stacks(emulator)]
    progress.done("destroyed" + (f"; still deployed: {', '.join(left)}" if left else ""))
    if not args.keep_emulator:
        progress("stopping the emulator")
        emulators.stop(location.state_dir)
        progress.done("stopped")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    location = _location(args)
    emulator = _running(args, location)
    output = _cdk(args, emulator, location).diff(args.stacks, _context(args))
    if not args.verbose:
        print(output, end="")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from idempotent_local.demo import run_demo

    report = run_demo(_running(args, _location(args)), with_processor=args.anyway)
    print(json.dumps(report.as_dict(), indent=2) if args.json else report.render())
    return 0 if report.balanced else 1


def _mappings(runner: Any) -> list[Any]:
    """The runner's event source mappings; one whose queue is gone is an error that says so."""
    from botocore.exceptions import ClientError

    try:
        return list(runner.mappings())
    except ClientError as error:
        raise LocalCloudError(
            f"an event source mapping reads a queue that does not exist in the emulator ({error}); "
            "`local status` names what the deployed stacks are missing"
        ) from None


def _stop_on_signals() -> None:
    """Ctrl-C (SIGINT) and ``kill`` (SIGTERM) stop the command. Also when it was started in the background
    of a script: the shell then has it ignore SIGINT, and Python never raises KeyboardInterrupt for an
    ignored signal (``local run &`` followed by ``kill -INT`` would run on)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.default_int_handler)


def cmd_run(args: argparse.Namespace) -> int:
    from idempotent_local.runner import EventSourceRunner

    _stop_on_signals()
    emulator = _running(args, _location(args))
    stop = threading.Event()
    runner = EventSourceRunner(
        emulator,
        retry_delay=args.retry_delay,
        wait_seconds=args.wait,
        report=(lambda line: print(line, flush=True)) if not args.quiet else None,
    )
    every = _mappings(runner)
    mappings = [mapping for mapping in every if mapping.enabled]
    disabled = [mapping for mapping in every if not mapping.enabled]
    until = "until every queue is empty and every stream is read to its end" if args.drain else "Ctrl-C stops"
    try:  # from the first line on: Ctrl-C as soon as it says it polls stops it cleanly
        print(f"polling {len(mappings)} event source mapping(s) on {emulator.endpoint}; {until}", flush=True)
        for mapping in mappings:
            print(f"    {mapping.describe()}", flush=True)
        for mapping in disabled:
            print(f"    not polled (disabled): {mapping.describe()}", flush=True)
        if args.drain:
            runner.drain(timeout=args.timeout, mappings=mappings)
        else:
            runner.run(stop)
    except KeyboardInterrupt:
        stop.set()
    finally:
        runner.close()
        print("\n" + runner.stats.summary(), flush=True)
    if not args.drain:
        return 1 if runner.stats.unable else 0
    totals = runner.stats.totals()
    return 1 if totals["failed"] or totals["quarantined"] else 0


def cmd_status(args: argparse.Namespace) -> int:
    from idempotent_local import mappings
    from idempotent_local.stacks import Inventory, deployed_stacks

    location = _location(args)
    emulator = emulators.find(location.state_dir)
    if emulator is None:
        print(f"no emulator running for {location.describe()} (state in {location.state_dir}/)")
        return 3
    print(f"emulator: {emulator.endpoint} (pid {emulator.pid}) for {location.describe()}")
    print(f"state:    {location.state_dir}/")
    inventory = Inventory(emulator)
    problems = _print_stacks(
        deployed_stacks(emulator, include_bootstrap=True, inventory=inventory), "  ", True
    )
    for mapping in mappings.read(inventory.mappings()):
        print(f"  mapping {mapping.describe()}{'' if mapping.enabled else ' (disabled)'}")
    return 1 if problems else 0


def cmd_output(args: argparse.Namespace) -> int:
    from idempotent_local.stacks import stack_outputs

    location = _location(args)
    stacks = stack_outputs(_running(args, location), args.stack)
    if args.stack and not stacks:
        raise emulators.EmulatorError(f"no stack named {args.stack!r} is deployed in the emulator")
    having = [name for name, outputs in stacks.items() if args.name in outputs]
    if len(having) == 1:
        print(stacks[having[0]][args.name])
        return 0
    if having:
        raise emulators.EmulatorError(
            f"stacks {', '.join(having)} each have an output {args.name}: name one with --stack"
        )
    known = sorted({f"{stack}.{name}" for stack, outputs in stacks.items() for name in outputs})
    raise emulators.EmulatorError(
        f"no deployed stack has an output {args.name!r}; the outputs are: {', '.join(known) or 'none'}"
    )


def _body(data: str | None) -> bytes | None:
    """``--data``: the text, or the bytes of the file named after ``@`` (``@-``: stdin)."""
    if data is None:
        return None
    if data.startswith("@"):
        return sys.stdin.buffer.read() if data == "@-" else Path(data[1:]).read_bytes()
    return data.encode("utf-8")


def cmd_request(args: argparse.Namespace) -> int:
    from idempotent_local import api_gateway
    from idempotent_local.runner import EventSourceRunner

    emulator = _running(args, _location(args))
    route = api_gateway.resolve(emulator, args.url, args.method)
    headers = {}
    for header in args.header or []:
        name, separator, value = header.partition(":")
        if not separator:
            raise LocalCloudError(f"not a header: {header!r}; expected 'Name: value'")
        headers[name.strip()] = value.strip()
    event = api_gateway.proxy_event(
        route, query=urllib.parse.urlsplit(args.url).query, headers=headers, body=_body(args.data)
    )
    with EventSourceRunner(emulator) as runner:
        response = api_gateway.response_of(runner.invoke(route.function_arn, event))
    function = route.function_arn.rsplit(":", 1)[-1]
    print(f"HTTP {response.status} ({route.method} {route.resource_path} -> {function})", file=sys.stderr)
    if response.error:
        print(f"local: {response.error}", file=sys.stderr)
    sys.stdout.write(response.body.decode("utf-8", errors="replace"))
    if response.body and not response.body.endswith(b"\n"):
        sys.stdout.write("\n")
    return 0 if response.status < 400 else 1


DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
SECONDS_PER = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> float:
    """``90000``, ``90s``, ``30m``, ``25h`` or ``2d``, in seconds."""
    match = DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 25h, 30m, 90000)")
    return float(match.group(1)) * SECONDS_PER[match.group(2)]


def _span(seconds: float) -> str:
    return next(
        f"{seconds / per:g} {unit}"
        for unit, per in (("h", 3600), ("min", 60), ("s", 1))
        if seconds >= per or per == 1
    )


def cmd_age(args: argparse.Namespace) -> int:
    emulator = _running(args, _location(args))
    clock = emulator.control.clock(args.duration)
    ahead, older = _span(clock["offset_seconds"]), _span(args.duration)
    print(f"the emulator's clock is {ahead} ahead: what was written before now is {older} older:")
    for aged in clock["ages"]:
        print(f"    {aged}")
    return 0


# The tool's own processes also get AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE naming files that do not
# exist, so that no profile of the user's is read; a shell is not pointed at files that do not exist (the
# variables `env` exports already take precedence over a profile's).
NOT_FOR_A_SHELL = ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE")


def shell_environment(emulator: emulators.Emulator) -> dict[str, str]:
    """What ``eval "$(local env)"`` sets: the emulator's endpoint, region and fake credentials, and the
    switches that keep Node's banners out of a plain ``npx cdk`` (npm's settings stay the user's)."""
    quiet = {name: value for name, value in quiet_environment().items() if name in BANNER_VARIABLES}
    client = emulator.client_environment(base={})
    return {**quiet, **{name: value for name, value in client.items() if name not in NOT_FOR_A_SHELL}}


def cmd_env(args: argparse.Namespace) -> int:
    if args.unset:  # the names do not depend on the emulator, which may be gone already
        names = set(shell_environment(emulators.Emulator(pid=0, port=0, state_dir="."))) | BANNER_VARIABLES
        print("unset " + " ".join(sorted(names)))
        return 0
    env = shell_environment(_running(args, _location(args)))
    for name in sorted(env):
        print(f"export {name}={shlex.quote(env[name])}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    location = _location(args)
    running = emulators.find(location.state_dir)
    if running is not None:
        raise emulators.EmulatorError(
            f"an emulator is already running for {location.describe()}: {running.endpoint}, "
            f"pid {running.pid}; stop it first (`{args.prog_name} stop`)"
        )
    from idempotent_local import server

    server.serve(location.state_dir, port=args.port)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    location = _location(args)
    stopped = emulators.stop(location.state_dir)
    print(f"emulator of {location.describe()} stopped" if stopped else "no emulator was running")
    return 0


def _driving_commands(command: Any) -> None:
    """The commands that drive a deployed app: a request to its REST API, time for the emulator."""
    age = command(
        "age",
        "make time pass for the emulator (its clock moves ahead): every DynamoDB stream record written so "
        "far is older (after 24 hours it leaves its stream, and a stream mapping gives up what it had not "
        "delivered), and every FIFO deduplication id (after 5 minutes the same id is delivered again)",
        cmd_age,
        aliases=["age-streams", "age-dedup"],
    )
    age.add_argument("duration", type=duration, help="how much older: 25h, 30m, 90000 (seconds)")
    request = command(
        "request",
        "send an HTTP request to a deployed REST API (the URL its stack outputs): its Lambda proxy "
        "integration runs the function, as API Gateway would; the response body is printed, its status on "
        "stderr, exit code 1 for 4xx and 5xx",
        cmd_request,
    )
    request.add_argument("method", help="GET, POST, ...")
    request.add_argument("url", help="https://ID.execute-api.REGION.amazonaws.com/STAGE/PATH[?QUERY]")
    request.add_argument("-d", "--data", help="the body: text, or @FILE (@- reads stdin)")
    request.add_argument("-H", "--header", action="append", metavar="'NAME: VALUE'", help="a header (repeat)")


def add_commands(subparsers: Any, prog_name: str) -> None:
    """The commands, added to ``subparsers`` (of ``idempotent-pipeline local`` or the alias)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--app-dir",
        default=None,
        help="the CDK app (directory holding cdk.json); default: the nearest one from here up",
    )
    common.add_argument(
        "--state-dir",
        default=argparse.SUPPRESS,
        help="where the emulator keeps its state; default: <app dir>/.local-cloud",
    )

    def command(name: str, help: str, func: Any, aliases: Sequence[str] = ()) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(name, parents=[common], help=help, description=help, aliases=aliases)
        # ``func`` is what a caller runs (the error handling around the command), ``handler`` the command.
        parser.set_defaults(func=run_command, handler=func, prog_name=prog_name)
        return parser

    def app_options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("stacks", nargs="*", help="stacks to act on (default: all)")
        parser.add_argument("--output", help="cloud assembly directory (default: the app's, cdk.out)")
        parser.add_argument(
            "-c", "--context", action="append", metavar="KEY=VALUE", help="CDK context, passed to cdk"
        )
        parser.add_argument("-v", "--verbose", action="store_true", help="show the CDK CLI's output")

    deploy = command("deploy", "start the app's emulator, bootstrap, cdk deploy", cmd_deploy)
    app_options(deploy)
    deploy.add_argument(
        "--demo",
        action="store_true",
        help="then publish the sample traffic through the pipeline and report (make deploy does)",
    )
    deploy.add_argument("--no-demo", dest="demo", action="store_false", help=argparse.SUPPRESS)
    destroy = command("destroy", "cdk destroy, then stop the emulator", cmd_destroy)
    app_options(destroy)
    destroy.add_argument("--keep-emulator", action="store_true", help="leave the emulator running")
    app_options(command("diff", "cdk diff against what the emulator has deployed", cmd_diff))
    demo = command(
        "demo",
        "run sample traffic through the deployed pipeline and account for it (sample orders shaped for a "
        "pipeline that stores bodies as they are, like the reference stack)",
        cmd_demo,
    )
    demo.add_argument("--json", action="store_true", help="print the report as JSON")
    demo.add_argument(
        "--anyway",
        action="store_true",
        help="run it even when the function runs a PROCESSOR (which may reject the sample orders)",
    )
    run = command(
        "run",
        "poll the deployed event source mappings and run the functions until Ctrl-C (or, with --drain, until "
        "every mapped queue is empty and every mapped stream is read)",
        cmd_run,
    )
    run.add_argument(
        "--drain",
        action="store_true",
        help="stop once every mapped queue is empty (nothing visible, in flight or delayed) and every mapped "
        "stream is read to its end (no batch waiting for a retry); exit code 1 if a message or stream record "
        "failed, went to the dead-letter queue or was discarded: for scripts and CI",
    )
    run.add_argument(
        "--timeout",
        type=float,
        default=600,
        help="with --drain: give up (exit code 1) when the queues and streams are not drained after this "
        "many seconds (default: 600)",
    )
    run.add_argument(
        "--retry-delay",
        type=int,
        default=None,
        help="seconds before a failed record is retried (default: the queue's visibility timeout; 1 s for a "
        "stream batch)",
    )
    run.add_argument("--wait", type=int, default=5, help="long-poll wait in seconds (default: 5)")
    run.add_argument("-q", "--quiet", action="store_true", help="only the summary, no line per batch")
    command("status", "what is running and deployed", cmd_status)
    _driving_commands(command)
    output = command("output", "print the value of one stack output (for scripts)", cmd_output)
    output.add_argument("name", help="the output's name, e.g. TopicArn")
    output.add_argument("--stack", help="the stack (default: the only one with that output)")
    env = command("env", "print exports that point AWS tools at the emulator", cmd_env)
    env.add_argument(
        "--unset",
        action="store_true",
        help='print the line that undoes them: eval "$(idempotent-pipeline local env --unset)"',
    )
    serve = command("serve", "run the emulator in the foreground", cmd_serve)
    serve.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    command("stop", "stop the emulator", cmd_stop)


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed command; every error the user can act on is one line on stderr and exit code 1."""
    args._started = False
    if not hasattr(args, "state_dir"):
        args.state_dir = None
    try:
        require_moto()
        return int(args.handler(args))
    except KeyboardInterrupt:
        if args._started:
            emulators.stop(_location(args).state_dir)
            print("\ninterrupted: the emulator this command started is stopped", file=sys.stderr)
        else:
            print("\ninterrupted", file=sys.stderr)
        return 130
    except (MissingExtra, LocalCloudError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def parser(prog: str = ALIAS_PROG) -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_commands(root.add_subparsers(dest="local_command", required=True, metavar="COMMAND"), prog)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args))


__all__ = ["add_commands", "main", "parser", "run_command"]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
