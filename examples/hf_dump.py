#!/usr/bin/env python3
"""Dump an HF transformers forward pass in ropescope's reference layout, for `ropescope diverge`.

Runs a model with HF transformers (eager attention, output_attentions=True, output_hidden_states=True) on token
ids and writes, per chosen layer, the files `ropescope reference` writes and `ropescope diverge` reads
(fixtures/reference/README.md, and docs/diverge.md):

    file              shape           taken from
    q_pre_L{l}.npy    [H, T, d]       the query handed to apply_rotary_pos_emb: projected (from q_proj or a fused
                                      qkv_proj) and QK-normed where the model norms, before RoPE
    k_pre_L{l}.npy    [H_kv, T, d]    the key handed to apply_rotary_pos_emb
    v_L{l}.npy        [H_kv, T, d_v]  the value handed to the attention function, before repeat_kv
    q_L{l}.npy        [H, T, d]       the query handed to the attention function: after RoPE, not scaled
    k_L{l}.npy        [H_kv, T, d]    the key handed to the attention function: after RoPE, before repeat_kv
    scores_L{l}.npy   [H, T, T]       matmul(q, repeat_kv(k)^T) * scaling, the attention function's own product,
                                      before the mask (future keys hold their real products)
    attn_L{l}.npy     [H, T, T]       output_attentions: probabilities, exactly 0 on masked keys
    out_L{l}.npy      [H, T, d_v]     input of self_attn.o_proj: each head's sum_j p_ij v_j
    hidden_L{l}.npy   [T, n_embd]     output of decoder layer l (the residual stream after it); equal to
                                      output_hidden_states[l + 1] except after the last layer, where HF hands
                                      out the final norm's output instead
    logits.npy        [T, V]          output logits (unless --no-logits)
    ids.npy           [T]             the ids, int64
    meta.json                         producer, dtype, rows [0, T], layers, shapes, what was changed

Conventions (those of ropescope's reference): head-major arrays; rows are positions 0..T (every row); q and k in
HF's own coordinate order, half-split (dims i and i + d/2 form rotation pair i), which is also the order HF loads
llama GGUF files in (it undoes llama.cpp's interleaving permutation); q is not pre-scaled (the scale is in the
scores); arrays are stored in the model's dtype.

    python examples/hf_dump.py --model PATH.gguf --text "..." --out DIR [--layers 0,1,2] [--dtype float32]
        [--rope-theta X] [--no-logits]

--rope-theta X replaces the model's RoPE base by X after loading (HF's own default inverse frequencies
recomputed for that base): a deliberately wrong RoPE, for showing what `ropescope diverge` reports. Needs
transformers, torch, numpy and gguf (the python of fixtures/reference-venv.sh has them); nothing is fetched
(HF_HUB_OFFLINE=1). Tested on SmolLM2-135M (llama), Gemma 3 270M, and the converted Phi-3 (fused qkv_proj,
partial rotation) and Qwen 3 (QK-norm) fixtures; other decoder-only models whose attention module calls the
modeling module's apply_rotary_pos_emb and eager_attention_forward should work.
"""
import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")  # the GGUF loader's progress bar

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.disable_progress_bar()


def heads_first(t, n_heads):
    """[1, T, n_heads * dim] or [1, T, n_heads, dim] -> numpy [n_heads, T, dim]."""
    t = t.detach()[0]
    return t.reshape(t.shape[0], n_heads, -1).transpose(0, 1).contiguous().numpy().copy()


def parse_layers(spec, n_layers):
    if spec == "all":
        return list(range(n_layers))
    layers = sorted({int(s) for s in spec.split(",")})
    bad = [l for l in layers if not 0 <= l < n_layers]
    if bad:
        sys.exit(f"error: layers {bad} do not exist (the model has {n_layers})")
    return layers


def set_rope_theta(model, theta):
    """Recomputes the rotary embedding's inverse frequencies with HF's default formula for base theta."""
    rot = model.model.rotary_emb
    if rot.rope_type != "default":
        sys.exit(f"error: --rope-theta needs a default RoPE, the model has {rot.rope_type}")
    model.config.rope_parameters["rope_theta"] = theta
    inv_freq, _ = rot.compute_default_rope_parameters(model.config)
    with torch.no_grad():
        rot.inv_freq = inv_freq.to(rot.inv_freq.dtype)
        rot.original_inv_freq = rot.inv_freq.clone()


def dump(model, ids, layers):
    """One forward pass with hooks; returns {file name: numpy array}."""
    cfg = model.config
    mod = sys.modules[type(model.model.layers[0].self_attn).__module__]
    n_heads, n_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    got = {}
    hooks = []

    def keep(name, layer, n):
        def hook(_module, _inputs, output):
            got[f"{name}_L{layer}"] = heads_first(output, n)
        return hook

    # q and k before RoPE are the inputs of the modeling module's apply_rotary_pos_emb, [1, H, T, d] whatever the
    # projection (fused qkv_proj in Phi-3) and wherever the QK-norm sits (Gemma 3 norms after the reshape to
    # heads); the layer is the attention module that last started. Modules without that function (none of the
    # families above) fall back to hooks on the projections.
    rotary = getattr(mod, "apply_rotary_pos_emb", None)
    current = {}
    for l, layer in enumerate(model.model.layers):
        attn = layer.self_attn
        hooks.append(attn.register_forward_pre_hook(lambda _m, _i, l=l: current.__setitem__("layer", l)))
        if rotary is None:
            q_src = getattr(attn, "q_norm", None) or attn.q_proj
            k_src = getattr(attn, "k_norm", None) or attn.k_proj
            hooks.append(q_src.register_forward_hook(keep("q_pre", l, n_heads)))
            hooks.append(k_src.register_forward_hook(keep("k_pre", l, n_kv)))
        hooks.append(attn.o_proj.register_forward_pre_hook(
            lambda _m, inputs, l=l: got.__setitem__(f"out_L{l}", heads_first(inputs[0], n_heads))))
        hooks.append(layer.register_forward_hook(
            lambda _m, _i, output, l=l: got.__setitem__(
                f"hidden_L{l}", (output[0] if isinstance(output, tuple) else output)[0].detach().numpy().copy())))

    def apply_rotary_pos_emb(q, k, *args, **kwargs):
        l = current["layer"]
        got[f"q_pre_L{l}"] = q[0].detach().numpy().copy()
        got[f"k_pre_L{l}"] = k[0].detach().numpy().copy()
        return rotary(q, k, *args, **kwargs)

    original = mod.eager_attention_forward

    def eager_attention_forward(module, query, key, value, attention_mask, *args, **kwargs):
        l = module.layer_idx
        got[f"q_L{l}"] = query[0].detach().numpy().copy()
        got[f"k_L{l}"] = key[0].detach().numpy().copy()
        got[f"v_L{l}"] = value[0].detach().numpy().copy()
        scaling = kwargs.get("scaling", module.scaling)
        scores = torch.matmul(query, mod.repeat_kv(key, module.num_key_value_groups).transpose(2, 3)) * scaling
        softcap = kwargs.get("softcap")
        if softcap is not None:
            scores = torch.tanh(scores / softcap) * softcap
        got[f"scores_L{l}"] = scores[0].detach().numpy().copy()
        return original(module, query, key, value, attention_mask, *args, **kwargs)

    mod.eager_attention_forward = eager_attention_forward
    if rotary is not None:
        mod.apply_rotary_pos_emb = apply_rotary_pos_emb
    try:
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids]), use_cache=False, output_attentions=True,
                        output_hidden_states=True)
    finally:
        mod.eager_attention_forward = original
        if rotary is not None:
            mod.apply_rotary_pos_emb = rotary
        for h in hooks:
            h.remove()

    n_layers = cfg.num_hidden_layers
    for l in range(n_layers - 1):
        assert torch.equal(torch.from_numpy(got[f"hidden_L{l}"]), out.hidden_states[l + 1][0]), l
    files = {}
    for l in layers:
        got[f"attn_L{l}"] = out.attentions[l][0].detach().numpy().copy()
        for kind in ("q_pre", "k_pre", "v", "q", "k", "scores", "attn", "out", "hidden"):
            files[f"{kind}_L{l}.npy"] = got[f"{kind}_L{l}"]
    files["logits.npy"] = out.logits[0].detach().numpy().copy()
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a GGUF file HF transformers can load (gguf_file=)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="a prompt, tokenized by the tokenizer in the GGUF (add_special_tokens=True)")
    src.add_argument("--ids", help="comma-separated token ids")
    ap.add_argument("--out", required=True, help="output directory (created; existing files are replaced)")
    ap.add_argument("--layers", default="all", help="'all' or a comma-separated list")
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--rope-theta", type=float, help="replace the RoPE base (a deliberately wrong RoPE)")
    ap.add_argument("--no-logits", action="store_true", help="leave logits.npy out")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    folder, name = os.path.split(os.path.abspath(args.model))
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    ids = tok(args.text, add_special_tokens=True).input_ids if args.text else [int(s) for s in args.ids.split(",")]
    dtype = getattr(torch, args.dtype)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtype, attn_implementation="eager")
    model.eval()
    if args.rope_theta is not None:
        set_rope_theta(model, args.rope_theta)
    layers = parse_layers(args.layers, model.config.num_hidden_layers)

    files = dump(model, ids, layers)
    if args.no_logits:
        del files["logits.npy"]
    files["ids.npy"] = np.asarray(ids, dtype="<i8")
    os.makedirs(args.out, exist_ok=True)
    for fname, a in sorted(files.items()):
        np.save(os.path.join(args.out, fname), np.ascontiguousarray(a))
    meta = {
        "producer": f"transformers {transformers.__version__} (examples/hf_dump.py)",
        "torch": torch.__version__,
        "model_file": name,
        "dtype": args.dtype,
        "rope_theta_override": args.rope_theta,
        "rows": [0, len(ids)],
        "layers": layers,
        "n_tokens": len(ids),
        "coordinate_order": "half-split",
        "shapes": {f: list(a.shape) for f, a in sorted(files.items())},
    }
    with open(os.path.join(args.out, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: {len(ids)} tokens, layers {layers}, {args.dtype}"
          f"{f', rope_theta {args.rope_theta:g}' if args.rope_theta is not None else ''}")


if __name__ == "__main__":
    main()
