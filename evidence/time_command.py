"""
Run a command and record how long it took, for a page that states a command's time (the README's quick start):

  python evidence/time_command.py --json results/quickstart_cpu/command.json -- \
      python train.py configs/diff_sym_6L.py --out_dir=results/quickstart_cpu/diff_sym_6L

writes {command, elapsed_s, exit_status, commit, dirty, date, cpu} (the command's own exit status is this
script's). Time it on an otherwise idle machine: the record cannot tell.
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository's root
from hardware import cpu_info  # noqa: E402
from output import write_json  # noqa: E402
from rundir import code_version  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[1].strip())
    ap.add_argument('--json', required=True, help='the record to write')
    ap.add_argument('command', nargs=argparse.REMAINDER, help='the command, after --')
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ['--'] else args.command
    if not command:
        ap.error('give the command after --')
    code, start = code_version(), time.time()
    rc = subprocess.run(command).returncode
    elapsed = time.time() - start
    write_json(args.json, dict(command=' '.join(command), elapsed_s=round(elapsed, 1), exit_status=rc, **code,
                               date=time.strftime('%Y-%m-%d'), cpu=cpu_info()))
    return rc


if __name__ == '__main__':
    sys.exit(main())
