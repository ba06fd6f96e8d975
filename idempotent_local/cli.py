"""python -m idempotent_local COMMAND: the local cloud from the command line.

deploy   start (or reuse) the emulator, bootstrap, cdk deploy the app, then run the demo
demo     publish sample traffic through the deployed pipeline, drain it through the runner, report
run      poll every deployed event source mapping until Ctrl-C (the runner, for your own traffic)
destroy  cdk destroy the app, then stop the emulator
status   is the emulator running, and what is deployed in it
env      print the variables that point the AWS CLI / SDKs at the emulator: eval "$(... env)"
serve    run the emulator in the foreground until Ctrl-C (deploy starts it in the background)
stop     stop the emulator
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from idempotent_local import emulator as emulators
from idempotent_local.cdk import Cdk, CdkError
from idempotent_local.demo import DemoError, run_demo
from idempotent_local.emulator import Emulator, EmulatorError
from idempotent_local.runner import EventSourceRunner, RunnerError
from idempotent_local.stacks import deployed_stacks


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


def _running(state_dir: str) -> Emulator:
    emulator = emulators.find(state_dir)
    if emulator is None:
        raise EmulatorError(f"no emulator is running for {state_dir}/; run `make deploy` first")
    return emulator


def _context(args: argparse.Namespace) -> list[str]:
    extra: list[str] = []
    for pair in args.context or []:
        extra += ["--context", pair]
    return extra


def cmd_deploy(args: argparse.Namespace) -> int:
    if not (Path(args.app_dir) / "cdk.json").exists():
        raise CdkError(f"no cdk.json in the app directory: {Path(args.app_dir).resolve()}")
    progress = Progress(5 if args.demo else 4)
    progress("starting the local AWS emulator (moto, loopback only)")
    emulator, started = emulators.start(args.state_dir)
    args._started = started
    progress.done(
        f"{'started' if started else 'reused'} on {emulator.endpoint}, pid {emulator.pid}, "
        f"state in {args.state_dir}/"
    )
    cdk = Cdk(emulator, args.app_dir, output=args.output, stream=args.verbose)
    progress(f"bootstrapping aws://{emulators.ACCOUNT_ID}/{emulators.REGION} (cdk bootstrap)")
    if cdk.is_bootstrapped():
        progress.done("already bootstrapped")
    else:
        cdk.bootstrap()
        progress.done("bootstrapped")
    progress(f"deploying {' '.join(args.stacks) or 'every stack'} of {cdk.app_dir} (cdk deploy)")
    cdk.deploy(args.stacks, _context(args))
    progress.done("deployed")
    progress("checking that every resource of the templates exists in the emulator")
    problems = 0
    for stack in deployed_stacks(emulator):
        print(f"    {stack.name}: {stack.status}, {stack.resources} resources")
        for logical, kind in stack.not_created:
            problems += 1
            print(f"    ! {logical} ({kind}) was not created: the emulator does not know this type")
    if problems:
        print(f"    {problems} resource(s) missing; the pipeline may not be wired", flush=True)
    if args.demo:
        progress("running the pipeline: publish sample traffic, drain it through the event-source runner")
        report = run_demo(emulator)
        print("\n".join("    " + line for line in report.render().splitlines()), flush=True)
        if not report.balanced:
            return 1
    print(
        f"\nThe emulator keeps running on {emulator.endpoint}: `make demo` runs the traffic again, "
        f"`make destroy` removes the stack and stops it."
    )
    return 1 if problems else 0


def cmd_destroy(args: argparse.Namespace) -> int:
    emulator = emulators.find(args.state_dir)
    if emulator is None:
        print("==> no emulator is running: nothing to destroy")
        return 0
    progress = Progress(1 if args.keep_emulator else 2)
    progress(f"destroying the stacks of {Path(args.app_dir).resolve()} (cdk destroy)")
    Cdk(emulator, args.app_dir, output=args.output, stream=args.verbose).destroy(args.stacks, _context(args))
    left = [s.name for s in deployed_stacks(emulator)]
    progress.done("destroyed" + (f"; still deployed: {', '.join(left)}" if left else ""))
    if not args.keep_emulator:
        progress("stopping the emulator")
        emulators.stop(args.state_dir)
        progress.done("stopped")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    report = run_demo(_running(args.state_dir))
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(report.render())
    return 0 if report.balanced else 1


def cmd_run(args: argparse.Namespace) -> int:
    emulator = _running(args.state_dir)
    stop = threading.Event()
    runner = EventSourceRunner(emulator, retry_delay=args.retry_delay, wait_seconds=args.wait)
    mappings = runner.mappings()
    print(f"polling {len(mappings)} event source mapping(s) on {emulator.endpoint}; Ctrl-C stops")
    for mapping in mappings:
        print(f"    {mapping.queue_arn} -> {mapping.function_name} (batch {mapping.batch_size})")
    try:
        runner.run(stop)
    except KeyboardInterrupt:
        stop.set()
    finally:
        runner.close()
        s = runner.stats
        print(
            f"\n{s.invocations} invocations, {s.records} records: {s.succeeded} succeeded, {s.failed} failed"
        )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    emulator = emulators.find(args.state_dir)
    if emulator is None:
        print(f"no emulator running for {args.state_dir}/")
        return 3
    print(f"emulator: {emulator.endpoint} (pid {emulator.pid})")
    for stack in deployed_stacks(emulator, include_bootstrap=True):
        print(f"  {stack.name}: {stack.status}, {stack.resources} resources")
    for mapping in EventSourceRunner(emulator).mappings():
        print(f"  mapping {mapping.queue_arn} -> {mapping.function_name} (batch {mapping.batch_size})")
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    emulator = _running(args.state_dir)
    env = emulator.client_environment(base={})
    for name in sorted(env):
        print(f"export {name}={shlex.quote(env[name])}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    emulators.serve(args.state_dir, port=args.port)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    print("emulator stopped" if emulators.stop(args.state_dir) else "no emulator was running")
    return 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="python -m idempotent_local",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    root.add_argument(
        "--state-dir",
        default=str(emulators.DEFAULT_STATE_DIR),
        help="where the emulator keeps its state file and logs (default: .local-cloud)",
    )
    # --state-dir is accepted before or after the command.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--state-dir", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    subparsers = root.add_subparsers(dest="command", required=True)

    class _Commands:
        @staticmethod
        def add_parser(name: str, **kwargs: object) -> argparse.ArgumentParser:
            return subparsers.add_parser(name, parents=[common], **kwargs)  # type: ignore[arg-type]

    commands = _Commands()

    def app_options(command: argparse.ArgumentParser) -> None:
        command.add_argument("stacks", nargs="*", help="stacks to act on (default: all)")
        command.add_argument("--app-dir", default=".", help="directory holding cdk.json (default: .)")
        command.add_argument("--output", help="cloud assembly directory (default: the app's, cdk.out)")
        command.add_argument(
            "-c",
            "--context",
            action="append",
            metavar="KEY=VALUE",
            help="CDK context, passed to cdk as --context",
        )
        command.add_argument("-v", "--verbose", action="store_true", help="show the CDK CLI's output")

    deploy = commands.add_parser("deploy", help="start the emulator, bootstrap, deploy, run the demo")
    app_options(deploy)
    deploy.add_argument("--no-demo", dest="demo", action="store_false", help="deploy only")
    deploy.set_defaults(func=cmd_deploy)
    destroy = commands.add_parser("destroy", help="cdk destroy, then stop the emulator")
    app_options(destroy)
    destroy.add_argument("--keep-emulator", action="store_true", help="leave the emulator running")
    destroy.set_defaults(func=cmd_destroy)
    demo = commands.add_parser("demo", help="run sample traffic through the deployed pipeline")
    demo.add_argument("--json", action="store_true", help="print the report as JSON")
    demo.set_defaults(func=cmd_demo)
    run = commands.add_parser("run", help="poll the deployed event source mappings until Ctrl-C")
    run.add_argument(
        "--retry-delay",
        type=int,
        default=None,
        help="seconds before a failed record is retried (default: the queue's visibility timeout)",
    )
    run.add_argument("--wait", type=int, default=5, help="long-poll wait in seconds (default: 5)")
    run.set_defaults(func=cmd_run)
    commands.add_parser("status", help="what is running and deployed").set_defaults(func=cmd_status)
    commands.add_parser("env", help="print exports that point AWS tools at the emulator").set_defaults(
        func=cmd_env
    )
    serve = commands.add_parser("serve", help="run the emulator in the foreground")
    serve.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    serve.set_defaults(func=cmd_serve)
    commands.add_parser("stop", help="stop the emulator").set_defaults(func=cmd_stop)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args._started = False
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        if args._started:
            emulators.stop(args.state_dir)
            print("\ninterrupted: the emulator this command started is stopped", file=sys.stderr)
        else:
            print("\ninterrupted", file=sys.stderr)
        return 130
    except (EmulatorError, CdkError, RunnerError, DemoError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
