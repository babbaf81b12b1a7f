"""
Backfill results/<sweep>/provenance.json for the committed runs that predate summary.json's own provenance (its
`code`, `machine` and resolved `dtype`, which train.py records from commit d6d1cf7 on): one entry per run folder,
each marked "backfilled": true. A run whose summary.json records its own `machine` has no entry.

  python evidence/backfill_provenance.py       # from a full git checkout (it reads the history); rewrites the files

Where each field comes from:
  added_in, added_on   the commit that added the run's summary.json (git log --diff-filter=A)
  replaced_in          the last commit that rewrote it, where not the one that added it (a run trained again)
  trained_at           the commit the run trained at, where a results page or the commit's message names it; else
                       null (the run trained from a checkout at or before added_in)
  threads              torch's thread count, where the page gives it (OMP_NUM_THREADS=1); absent where it does not
  machine, machine_source
                       the processor, as the results pages name it for that commit (MACHINES below, with the page);
                       a bf16 CPU run that no page places is put on the EPYC Genoa, inferred: dtype=auto resolves to
                       bf16 on a CPU only with AMX or AMD's AVX512-BF16 (hardware.cpu_has_fast_bf16), and the Genoa
                       is the one such machine the pages name
  dtype, torch         summary.json's (dtype there is the resolved one; its config's dtype may say auto)
  predates             report.NUMERICS commits that apply to the run's config and that the run's code is older than
                       (trained_at, else the commit that added or rewrote it): its numbers are of superseded numerics
"""
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)
from report import NUMERICS, RUN_RE  # noqa: E402

GENOA = 'AMD EPYC Genoa'  # family 25 model 17 (Zen 4), AVX512-BF16, 2 cores
NAPLES = 'AMD EPYC Naples'  # family 23 model 1, AVX2 only, 2 cores
MILAN = 'AMD EPYC Milan'  # 2 cores
XEON = 'Intel Xeon Emerald Rapids'  # AMX hidden, 2 cores
H100 = 'NVIDIA H100'
# the commit that added or rewrote a run -> (machine, where a page says so, the commit the run trained at or None,
# and torch's thread count where the page gives it: OMP_NUM_THREADS)
MACHINES = {
    'c68a3df': (H100, 'results/claims.md at 0c5fcf6, "At the seed\'s schedule": one H100, commit c68a3df', 'c68a3df'),
    '44224b5': (XEON, 'results/claims.md at 0c5fcf6 (off_by_one: the other four at 44224b5, fp32 on a 2-core Intel '
                'Xeon Emerald Rapids); hardware.py (an Emerald Rapids VM that hides AMX)', '44224b5'),
    '90844b4': (XEON, 'results/claims.md at 0c5fcf6 (off_by_one at dropout 0.2: nanogpt, Diff and Sym at 90844b4, '
                'fp32 on the Xeon)', '90844b4'),
    '83b94f1': (MILAN, 'results/claims.md at 0c5fcf6 (Diff+Sym and Norm+Sym at 83b94f1, fp32 on a 2-core AMD EPYC '
                'Milan); results/seed_table_explained.md (the causal nanogpt at dropout 0.2 is the fp32 run of '
                '83b94f1, EPYC Milan)', '83b94f1'),
    '91db63d': (NAPLES, 'commit message of 91db63d; results/seed_table_explained.md, last section', '8b66842'),
    'b90e45c': (NAPLES, 'commit message of b90e45c; results/seed_table_explained.md, last section', '8b66842'),
    '7cd65ae': (GENOA, 'results/claims.md at 0c5fcf6 (nanogpt at commit 7cd65ae, bf16 on the EPYC Genoa)', '7cd65ae'),
    '2d7f180': (GENOA, 'results/sink_cpu.md at 2d7f180: "It ran at commit 9d624ed from a separate checkout, as two '
                'queues pinned one per core (OMP_NUM_THREADS=1 ...)", a 2-core AMD EPYC family 25 model 17', '9d624ed',
                1),
    '509c04f': (GENOA, 'results/needle_cpu.md at 509c04f: "Command, at commit 9516892: OMP_NUM_THREADS=1 '
                'PROFILE=retrieval ...", 2 cores of an AMD EPYC family 25 model 17', '9516892', 1),
}
# sweeps whose pages name the commit every run trained at (a separate checkout): (commit, the page, torch's threads
# where the page gives them)
NEEDLE = ('results/needle_cpu.md at b2bf8f5 to c68a3df, "Machine": 2 cores of an AMD EPYC (family 25, model 17), "Code: '
          'commit b1e93b2 ..., run from a separate checkout; one thread per run (OMP_NUM_THREADS=1)"')
TRAINED_AT = {'shakespeare_cpu_long': ('cecfced', 'results/claims.md at 0c5fcf6, "Machine": every causal run at '
                                       'commit cecfced, 2 cores of an AMD EPYC Genoa', None),
              'needle_cpu': ('b1e93b2', NEEDLE, 1),
              'needle_cpu_seeds6-10': ('b1e93b2', 'results/needle_cpu.md at a068a5a: seeds 6-10 ran with "the same '
                                       'configs and commit (b1e93b2), one thread per run"; ' + NEEDLE, 1),
              # its nanogpt run changed from 2 threads to 1 when it was resumed: threads unknown
              'shakespeare_full_cpu': ('34745d8', 'results/shakespeare_full_cpu/sink_trajectory.md at d3e4fed: "on 2 '
                                       'cores of an AMD EPYC (family 25 model 17, AVX512-BF16, no AMX) ..., from a '
                                       'checkout of 34745d8"', None)}


def git(*args):
    return subprocess.run(['git', *args], cwd=HERE, capture_output=True, text=True, check=True).stdout.strip()


def is_ancestor(a, b):
    return subprocess.run(['git', 'merge-base', '--is-ancestor', a, b], cwd=HERE).returncode == 0


def entry(sweep, path):
    rel = os.path.relpath(path, HERE)
    added = git('log', '--diff-filter=A', '--format=%h %ad', '--date=short', '--', rel).splitlines()[-1].split()
    last = git('log', '-1', '--format=%h', '--', rel)
    with open(path) as f:
        s = json.load(f)
    e = dict(backfilled=True, added_in=added[0], added_on=added[1])
    if last != added[0]:
        e['replaced_in'] = last
    machine, source, trained, threads = (MACHINES.get(last, ()) + (None,) * 4)[:4]
    if (machine == H100) != (s.get('device') == 'cuda'):  # a commit may add CPU runs beside the GPU's
        machine, source, trained, threads = None, None, None, None
    if sweep in TRAINED_AT and last == added[0] and is_ancestor(TRAINED_AT[sweep][0], added[0]):
        trained, source, threads = TRAINED_AT[sweep]  # a run committed before that commit did not train at it
        machine = GENOA
    if machine is None and s.get('device') == 'cpu' and s.get('dtype') == 'bfloat16':
        machine, source = GENOA, ('inferred: bf16 on a CPU (dtype=auto resolves to bf16 only with AMX or AMD '
                                  'AVX512-BF16), and the pages name the EPYC Genoa as the bf16 CPU')
    e.update(trained_at=trained, machine=machine or 'unknown', machine_source=source or 'no page names it',
             dtype=s.get('dtype'), torch=s.get('torch_version'))
    if threads:
        e['threads'] = threads
    code = trained or last
    e['predates'] = [c for c, _, _, applies in NUMERICS if applies(s.get('config', {})) and not is_ancestor(c, code)]
    return e


def main():
    for sweep_dir in sorted(glob.glob(os.path.join(HERE, 'results', '*'))):
        sweep = os.path.basename(sweep_dir)
        runs = {}
        for path in sorted(glob.glob(os.path.join(sweep_dir, '*', 'summary.json'))):
            name = os.path.basename(os.path.dirname(path))
            with open(path) as f:
                own = 'machine' in json.load(f)  # train.py recorded its provenance itself: nothing to backfill
            if RUN_RE.match(name) and not own:
                runs[name] = entry(sweep, path)
        if runs:
            with open(os.path.join(sweep_dir, 'provenance.json'), 'w') as f:
                json.dump(runs, f, indent=1, sort_keys=True)
                f.write('\n')
            print(f'{sweep}: {len(runs)} runs')


if __name__ == '__main__':
    main()
