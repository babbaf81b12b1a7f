"""
What a run was computed on, and which runs may be pooled: the rules report.py's tables, evidence/claims.py's verdicts
and evidence/pages.py share. A run's provenance comes from its summary.json (train.py's record: `machine`, `code`,
`dtype`, `compile`, `cuda_graph`), else from its sweep's provenance.json, backfilled from the pages' text by
evidence/backfill_provenance.py (marked *inferred* wherever it shows). Runs are one homogeneous group only where
nothing but their seed tells them apart; "unknown" never makes two runs alike.
"""
import json
import math
import os
import re

# config keys that say where and how a run is computed, logged or saved, not what it computes: a resume may change
# them (config.py's resume rules), a sweep's settings leave them out (sweep.py), and the seeds of a cell may differ
# in them, as in the seed (FREE_KEYS). Here, where no torch is imported, so that report.py and a Slurm login node
# read them without it
FREE_ON_RESUME = ('out_dir', 'init_from', 'eval_only', 'device', 'dtype', 'compile', 'compile_mode', 'cuda_graph',
                  'eval_group', 'wandb_log', 'wandb_project', 'wandb_run_name', 'wandb_mode', 'log_interval',
                  'always_save_checkpoint', 'ckpt_interval', 'outlier_interval', 'resume_strict')
FREE_KEYS = ('seed',) + FREE_ON_RESUME
# the keys every run of a sweep shares, whatever its variant: the schedule and the data (the title's Setup line)
SETUP_KEYS = ('dataset', 'causal', 'max_iters', 'lr_decay_iters', 'warmup_iters', 'learning_rate', 'min_lr',
              'dropout', 'batch_size', 'block_size', 'n_embd', 'n_head', 'eval_interval', 'eval_iters')
SHARED_KEYS = SETUP_KEYS + ('decay_lr', 'weight_decay', 'beta1', 'beta2', 'grad_clip', 'gradient_accumulation_steps',
                            'window_order', 'leak', 'bos')


# The commits that changed what a model computes, not only how fast or in which order: (commit, date, what changed,
# which runs' configs it changes). A run trained before one, in a config it changes, is of superseded numerics: the
# tables name it, and a claim resting on it renders no verdict (evidence/claims.py). Changes of summation order, thread count,
# mask bits or speed (e.g. ea59eef's 16-bit dropout masks, 21de5f8's blocked CPU attention) draw other random numbers
# from the same model and are not listed.
NUMERICS = [
    ('8b66842', '2026-11-26', "Diff's attention dropout: (drop(A1) − λ drop(A2)) V on every path; before it, the naive "
     "path that every leak run takes dropped A1 − λA2 with one mask",
     lambda c: c.get('attn') in ('diff', 'diffv2') and c.get('leak', 'none') != 'none' and c.get('dropout', 0) > 0),
]


def read_provenance(root):
    """root/provenance.json: {run folder: entry} for runs older than summary.json's own record (machine, code),
    backfilled by evidence/backfill_provenance.py; {} without one."""
    path = os.path.join(root, 'provenance.json')
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


# One label per processor: a CPU by (vendor, family, model) as /proc/cpuinfo gives them, so that a run whose
# summary.json records its CPU (hardware.machine) and a run whose backfilled provenance.json names it from the pages
# carry the same label ("AMD EPYC (family 25, model 1)" is the "AMD EPYC Milan" of the pages)
CPU_NAMES = {('AuthenticAMD', '23', '1'): 'AMD EPYC Naples', ('AuthenticAMD', '25', '1'): 'AMD EPYC Milan',
             ('AuthenticAMD', '25', '17'): 'AMD EPYC Genoa', ('GenuineIntel', '6', '207'): 'Intel Xeon Emerald Rapids'}


def machine_label(m):
    """The processor of summary.json's `machine` (hardware.machine): the GPU's name on CUDA, else the CPU's label in
    CPU_NAMES, else its name with its family and model (one name, "AMD EPYC", covers processors with and without bf16
    units)."""
    if m.get('gpu'):
        return m['gpu']
    cpu = m.get('cpu') or {}
    known = CPU_NAMES.get((cpu.get('vendor'), str(cpu.get('family')), str(cpu.get('model'))))
    if known:
        return known
    name = cpu.get('name') or 'unknown CPU'
    return f"{name} (family {cpu['family']}, model {cpu['model']})" if cpu.get('family') else name


_ANCESTRY = {}


def contains(commit, rule):
    """Whether the code at `commit` includes commit `rule` (git merge-base --is-ancestor), None where git cannot
    say (no commit recorded, a checkout without that history)."""
    if not commit:
        return None
    if (commit, rule) not in _ANCESTRY:
        import subprocess
        try:
            rc = subprocess.run(['git', 'merge-base', '--is-ancestor', rule, commit], capture_output=True,
                                cwd=os.path.dirname(os.path.abspath(__file__)), timeout=30).returncode
        except (OSError, subprocess.TimeoutExpired):
            rc = 128
        _ANCESTRY[(commit, rule)] = {0: True, 1: False}.get(rc)
    return _ANCESTRY[(commit, rule)]


def provenance(s):
    """What a run was computed on: {'machine', 'dtype', 'commit' (the code it trained, or None), 'superseded' (the
    NUMERICS commits it predates in a config they change), 'era_unknown' (those where git cannot say), 'path',
    'threads', 'backfilled', 'inferred' (backfilled: the machine, the threads and any commit taken from the pages'
    text)}. From
    summary.json's own record where train.py wrote one (`machine`, `code`, the resolved `dtype`, `compile`,
    `cuda_graph`), else from the sweep's backfilled provenance.json."""
    p, m = s.get('_prov') or {}, s.get('machine')
    commit = (s.get('code') or {}).get('commit') or p.get('trained_at')
    superseded, era_unknown = (list(p['predates']), []) if 'predates' in p else ([], [])
    if 'predates' not in p:
        for c, _, _, changes in NUMERICS:
            if changes(s['config']):
                {False: superseded, None: era_unknown}.get(contains(commit, c), []).append(c)
    on_cpu = not (m or {}).get('gpu') and str(s.get('device') or 'cpu').startswith('cpu')
    # torch's thread count: summary.json's record, else the backfilled entry's where a page names it (OMP_NUM_THREADS)
    threads = (((m or {}).get('cpu') or {}).get('threads') if m else p.get('threads')) if on_cpu else None
    return dict(machine=machine_label(m) if m else p.get('machine', 'unknown'),
                dtype=s.get('dtype') or p.get('dtype') or 'unknown', commit=commit, superseded=superseded,
                era_unknown=era_unknown, path=path_of(s), threads=(threads or 'unknown') if on_cpu else None,
                backfilled=not m and bool(p), inferred=not m and bool(p))


def path_of(s):
    """How the step ran: eager, compiled (torch.compile), graphed (CUDA graphs) or compiled+graphed, from
    summary.json's `compile` and `cuda_graph` (runs from before CUDA graphs were not graphed); 'path unknown' where
    summary.json has no `compile`."""
    if 'compile' not in s:
        return 'path unknown'
    return '+'.join(x for x, on in (('compiled', s['compile']), ('graphed', s.get('cuda_graph'))) if on) or 'eager'


def computed_on(s, mark=False):
    """What may differ between runs that a table sets side by side and move a number: 'bfloat16 on <processor>,
    <path>', then on a CPU the thread count, then the code era (', before 8b66842': superseded numerics; ', era of
    8b66842 unknown': no commit to tell). Runs with equal texts are one homogeneous group (unknowns are a value of
    their own: group_key). mark: the processor of a backfilled run says *inferred*."""
    p = provenance(s)
    machine = p['machine'] + (' (*inferred*)' if mark and p['inferred'] else '')
    threads = '' if p['threads'] is None else (', threads unknown' if p['threads'] == 'unknown' else
                                               f", {p['threads']} thread{'s' if p['threads'] != 1 else ''}")
    return (f"{p['dtype']} on {machine}, {p['path']}{threads}" + ''.join(f', before {c}' for c in p['superseded'])
            + ''.join(f', era of {c} unknown' for c in p['era_unknown']))


def group_label(ss):
    """computed_on of a homogeneous group of runs, its processor marked *inferred* where the runs' provenance is (for
    k of n where only some runs' is)."""
    k = sum(provenance(s)['inferred'] for s in ss)
    text = computed_on(ss[0]) + (', each run alike to no other' if 'unknown' in computed_on(ss[0]) else '')
    if not k:
        return text
    machine, threads = provenance(ss[0])['machine'], provenance(ss[0])['threads']
    mark = '*inferred*' if k == len(ss) else f'*inferred* for {k} of {len(ss)} runs'
    text = text.replace(f' on {machine},', f' on {machine} ({mark}),', 1)
    if isinstance(threads, int):  # a thread count a page named (a recorded one has no backfilled entry)
        text = re.sub(r', (\d+ threads?)', rf', \1 ({mark})', text, count=1)
    return text


def group_key(s):
    """computed_on, where it is known: a run with anything unknown in it (processor, format, path, threads, era) is
    alike to no other run, so its key names the run."""
    text = computed_on(s)
    return text + f" ({s['_name']})" if 'unknown' in text else text


def homogeneous(ss):
    """{group_key: [runs]}, in the order first seen: the groups of runs that nothing but their seed tells apart."""
    out = {}
    for s in ss:
        out.setdefault(group_key(s), []).append(s)
    return out


# The rules that keep a run out of every verdict (evidence/claims.py) and that report.py's tables flag: a run whose
# code is not known (no commit recorded or inferred, or a tree with uncommitted changes), or that was made on another
# corpus or with other sweep settings than the runs it is compared with (the most common value among them).
def excluded(s, among):
    """Why run s is read by no verdict, compared with the runs `among` (s's own included), or None."""
    p = provenance(s)
    if not p['commit']:
        return 'no commit recorded'
    if (s.get('code') or {}).get('dirty'):
        return 'a tree with uncommitted changes'
    for key in SHARED_KEYS:
        if key not in s['config']:
            continue
        seen = [repr(r['config'][key]) for r in among if key in r['config']]
        usual = max(sorted(set(seen)), key=seen.count)
        if repr(s['config'][key]) != usual:
            return ('another corpus' if key == 'dataset' else 'other sweep settings') + \
                f" ({key}={s['config'][key]}, not {usual})"
    return None


def group_number(label, names):
    """label's number in a table's legend `names` (1-based), appended where new."""
    if label not in names:
        names.append(label)
    return names.index(label) + 1


def legend(names):
    return '*mixed* groups: ' + '; '.join(f'G{i} = {n}' for i, n in enumerate(names, 1)) + '.'


def grouped(ss, text, names):
    """text(runs) of a cell's runs; where they are not one homogeneous group, ' *mixed*: ' and each group's text
    after the pooled one (G1, G2, ... as numbered in names)."""
    groups = list(homogeneous(ss).values())
    if len(groups) < 2:
        return text(ss)
    return text(ss) + ' *mixed*: ' + '; '.join(f'G{group_number(group_label(g), names)} {text(g)}' for g in groups)


def groups_disagree(groups):
    """Whether a comparison's groups (paired_groups) differ in the sign of their mean difference: then no pooled
    value stands for them."""
    signs = {math.copysign(1, g['stat']['diff']) if g['stat']['diff'] else 0 for g in groups}
    return len(groups) > 1 and len(signs) > 1
