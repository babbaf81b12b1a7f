"""
A run's checkpoints: ckpt.pt (everything a resume needs) and best.pt (the best weights), written atomically, and the
rules of a resume: it continues the run exactly, so a key that changes what the run computes is refused unless the
command line asks for it (FREE_ON_RESUME in config.py lists the keys that may change freely).
"""
import os
from dataclasses import asdict

import torch

from config import DEFAULTS, FREE_ON_RESUME, MODEL_KEYS
from model import CHECKPOINT_FORMAT, UnreadableCheckpoint, load_checkpoint
from output import atomic_write
from rundir import RunError, run_path


def check_resume_config(cfg, saved, explicit, path):
    """A resume continues the run exactly, so a training key whose value differs from the run's is refused, each
    named, unless it was given on the command line: that changes the run on purpose (--max_iters, to extend it).
    Returns the accepted changes."""
    changed = {k: (saved[k], cfg[k]) for k in DEFAULTS
               if k not in MODEL_KEYS and k not in FREE_ON_RESUME and k in saved and saved[k] != cfg[k]}
    refused = [k for k in changed if k not in explicit or cfg['resume_strict']]
    if refused and cfg['resume_strict']:
        raise ValueError(f"{path} was trained with " + ', '.join(f"{k}={changed[k][0]!r}" for k in refused) +
                         "; this command gives " + ', '.join(f"{k}={changed[k][1]!r}" for k in refused) +
                         ". resume_strict=True (ablate.sh sets it) continues a run only with its own settings: "
                         "re-launch with those, or start the run anew in another folder (another SWEEP=)")
    if refused:
        was = ', '.join(f"{k}={changed[k][0]!r}" for k in refused)
        now = ', '.join(f"{k}={changed[k][1]!r}" for k in refused)
        raise ValueError(f"{path} was trained with {was}; this config gives {now}. A resume continues the run "
                         f"exactly, so these must match: resume with the run's own config, or change the run on "
                         f"purpose by giving each on the command line ("
                         + ' '.join(f"--{k}={changed[k][1]!r}" for k in refused) + ")")
    return changed


def load_resumed(cfg, path, explicit, master, n_tokens, pinned=()):
    """ckpt.pt's model and contents; the architecture comes from the checkpoint, so cfg's model keys are set (a model
    field newer than the checkpoint takes its default, which is the model the checkpoint was trained as). explicit:
    the keys on the command line; pinned: the model keys this command sets (config.pinned_model_keys), which must
    equal the checkpoint's. n_tokens: the token ids of this command's data, which the checkpoint's embedding must
    have rows for."""
    try:
        model, ckpt = load_checkpoint(path, 'cpu')
    except UnreadableCheckpoint as e:
        raise ValueError(unreadable_advice(e, path)) from None
    args = asdict(model.config)
    saved = ckpt.get('config', {})
    # bos cannot change, not even on purpose nor for a look (eval_only): its token is an id of the model's vocabulary
    if 'bos' in saved and saved['bos'] != cfg['bos']:
        raise ValueError(f"{path} was trained with bos={saved['bos']!r}, and bos cannot change on resume (its token "
                         f"is an id the model's embedding has or lacks): resume with --bos={saved['bos']!r}, or start "
                         f"a new run in another --out_dir")
    # before the model keys: a dataset whose ids the embedding lacks cannot be fixed by dropping another key
    if args['vocab_size'] < n_tokens:  # a resume on another dataset, whose ids the embedding lacks
        raise ValueError(f"{path}'s model has vocab_size={args['vocab_size']}, and dataset '{cfg['dataset']}' holds "
                         f"{n_tokens} token ids{' (with bos)' if cfg['bos'] else ''}: a resume continues on data its "
                         f"embedding can read. Resume with the run's own config (its dataset was "
                         f"{saved.get('dataset')!r}), or start a new run in another --out_dir")
    # the model is the checkpoint's: a model key this command sets to something else, on the command line or in a
    # config file (another variant's, by a key it sets or one it leaves at its default), is refused, since the run
    # would go on without it. vocab_size is the dataset's unless given, and train.py checks it against the data.
    # eval_only only looks: the keys are noted
    asked = [k for k in MODEL_KEYS if k in pinned and cfg[k] != args[k]]
    if asked and not cfg['eval_only']:
        given = [f"--{k}" for k in asked if k in explicit]
        keep = [f"--{k}={args[k]!r}" for k in asked if k not in explicit]
        raise ValueError(f"{path}'s model has " + ', '.join(f"{k}={args[k]!r}" for k in asked) +
                         "; this command gives " + ', '.join(f"{k}={cfg[k]!r}" for k in asked) + ". A resume "
                         "continues the checkpoint's model, whose keys cannot change: " +
                         (f"drop {' '.join(given)}, " if given else '') + "resume with the run's own config file (or "
                         "none: the checkpoint's model)" + (f", or give the checkpoint's {' '.join(keep)}" if keep
                                                            else '') + ", or start a new run in another --out_dir")
    for k in asked:
        if master:
            print(f"warning: {k}={cfg[k]!r} ignored: the checkpoint's model has {k}={args[k]!r}")
    cfg.update({k: args[k] for k in MODEL_KEYS})
    # eval_only looks at the checkpoint, whatever schedule the command line gives: nothing else to refuse. It
    # evaluates as the run did (its batch_size, eval_iters, seed: the same batches, so the losses it logged),
    # except for the keys given on the command line
    if cfg['eval_only']:
        cfg.update({k: saved[k] for k in DEFAULTS if k in saved and k not in MODEL_KEYS and k not in FREE_ON_RESUME
                    and k not in explicit})
    changed = {} if cfg['eval_only'] else check_resume_config(cfg, saved, explicit, path)
    if master:
        for k, (was, now) in changed.items():
            print(f"resume: {k} changes from {was!r} to {now!r}, as the command line asks")
    if ckpt['iter_num'] > cfg['max_iters'] and not cfg['eval_only']:
        raise ValueError(f"{path} is at iteration {ckpt['iter_num']}, past max_iters={cfg['max_iters']}: "
                         f"set --max_iters to {ckpt['iter_num']} or more to continue it")
    return model, ckpt


def unreadable_advice(e, path):
    """A damaged ckpt.pt (a disk error, a copy cut short; train.py's own writes are atomic): what the run can do."""
    best = os.path.join(os.path.dirname(path), 'best.pt')
    kept = (f"{best} holds the weights of the run's best eval, for sample.py and analyze.py (not a resume: it has no "
            f"optimizer state); " if os.path.exists(best) else '')
    return (f"{e.what}, so the run cannot continue from it. Put back an earlier copy of it if you keep one; {kept}or "
            f"start the run anew: --init_from=scratch with another --out_dir")


def restore_optimizer(optimizer, scaler, ckpt, cuda_graph, device):
    """The optimizer's and GradScaler's state from ckpt.pt, with this run's learning rate and flags: cuda_graph=True
    wants AdamW's learning rate and step counts as device tensors (capturable), whatever the checkpoint's were."""
    optimizer.load_state_dict(ckpt['optimizer'])
    for group in optimizer.param_groups:  # the saved groups' lr and flags are another run's: this run's wins
        lr = float(group['lr'])
        group['lr'] = torch.tensor(lr, device=device) if cuda_graph else lr
        if 'capturable' in group:
            group['capturable'] = cuda_graph
        if cuda_graph:  # a checkpoint of a foreach AdamW kept its step counts on the CPU
            group['fused'] = True
            for p in group['params']:
                if 'step' in optimizer.state.get(p, {}):
                    optimizer.state[p]['step'] = optimizer.state[p]['step'].to(p.device, torch.float32)
    if 'scaler' in ckpt and scaler.is_enabled():
        scaler.load_state_dict(ckpt['scaler'])


def mend_best(cfg, state):
    """Rank 0, on resume: ckpt.pt is written before best.pt, so a crash between the two at an eval that improved
    leaves best.pt behind. Then ckpt.pt's weights are that best state, and best.pt is written from them."""
    ev = state.last_eval
    if ev.get('iter') != state.iter_num or ev.get('val_loss') != state.best_val_loss or state.iter_num == 0:
        return
    path = run_path(cfg, 'best.pt')
    try:  # a damaged best.pt (unreadable) is mended too: ckpt.pt holds the same best state
        if torch.load(path, map_location='cpu', weights_only=True).get('iter_num') == ev['iter']:
            return
    except Exception:  # noqa: BLE001: missing, or whatever torch raises for a damaged file
        pass
    print(f"{path} is behind {run_path(cfg)} (a stop between the two writes at iteration {ev['iter']}): mending it")
    save_checkpoint(cfg, state, None, 'best.pt')


def save_checkpoint(cfg, state, log, name='ckpt.pt'):
    """ckpt.pt: everything a resume needs. best.pt, for sampling and evaluation: the weights only (a third of
    ckpt.pt with AdamW). No RNG state: batches and dropout masks are pure functions of (seed, iteration,
    micro-batch). Both carry the tokenizer, so that sample.py decodes without the dataset. The write is atomic: a
    full disk leaves the previous file as it was, and an error that says so."""
    raw = state.raw_model
    ckpt = dict(format=CHECKPOINT_FORMAT, model=raw.state_dict(), model_args=asdict(raw.config),
                iter_num=state.iter_num, best_val_loss=state.best_val_loss, last_eval=state.last_eval, config=cfg,
                tokenizer=state.tokenizer, code=state.code)
    if name == 'ckpt.pt':
        ckpt['optimizer'] = state.optimizer.state_dict()
        if state.scaler.is_enabled():
            ckpt['scaler'] = state.scaler.state_dict()
        wandb_id = log.wandb_id if log is not None else state.wandb_id
        if wandb_id is not None:
            ckpt['wandb_run_id'] = wandb_id  # a resumed run continues the same wandb curves
        if state.clock is not None:
            ckpt['timing'] = state.clock.totals()
    path = run_path(cfg, name)
    try:
        atomic_write(path, lambda f: torch.save(ckpt, f))
    except OSError as e:
        where = f"the previous {path} is unchanged" if os.path.exists(path) else f"no {name} yet"
        raise RunError(f"could not write {path} at iteration {state.iter_num} ({e.strerror or e}); {where}. Free "
                       f"space or fix the folder's permissions, then continue with --init_from=resume") from None
    if name == 'ckpt.pt' and log is not None:
        log.retire_summary()  # ckpt.pt is past a finished run's summary now (a failed write left the run finished)
