"""DPO training of the knowledge-augmentation step (KG-Infused RAG section 3.6, eq. 11;
Appendix F, Table 21) with TRL, behind the optional ``dpo`` extra.

    pip install 'quillian[dpo]'   # trl, peft, datasets; install the torch for your GPU first
    python -m quillian.methods.kg_infused.dpo_train pairs.jsonl MODEL OUTPUT_DIR

``pairs.jsonl`` comes from ``quillian dpo-data``; MODEL is a Hugging Face name or
directory, or a ``.gguf`` file such as the bundled local model (dequantised on load).

The data are the rows :mod:`quillian.methods.kg_infused.dpo` writes (TRL's conversational
preference format). :class:`DPOTrainConfig` defaults are Table 21 (LLaMA3.1-8B and
Qwen2.5-7B, full-parameter fine-tuning on 4 A800 GPUs, one epoch):

=========================  ==========  ===========================================
Table 21                   value       TRL / transformers argument
=========================  ==========  ===========================================
Max sequence length        8000        ``max_length``
Batch size                 4           ``per_device_train_batch_size`` x devices x
                                       ``gradient_accumulation_steps`` (the paper
                                       does not say per device or total: here it is
                                       the total on one device; spread it yourself)
Learning rate              5e-7        ``learning_rate``
Training epochs            1           ``num_train_epochs``
Optimizer                  AdamW       ``optim="adamw_torch"``
AdamW beta1, beta2, eps    0.9, 0.999, ``adam_beta1``, ``adam_beta2``, ``adam_epsilon``
                           1e-8
Weight decay               0.0         ``weight_decay``
Warmup ratio               0.0         ``warmup_steps=0`` (no warmup)
DPO beta                   0.1         ``beta``
Ref model mixup alpha      0.6         ``ref_model_mixup_alpha`` (TR-DPO, with
Ref model sync steps       512         ``ref_model_sync_steps`` ``sync_ref_model``)
=========================  ==========  ===========================================

``lora=True`` trains a LoRA adapter instead (not the paper's setting); TRL cannot sync
the reference model of a PEFT model, so it requires ``sync_ref_model=False``.
Nothing here is imported until training starts; a missing package raises
:class:`~quillian.errors.MissingExtraError`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from quillian.errors import ConfigError, InputError, MissingExtraError

__all__ = ["DPOTrainConfig", "load_preference_rows", "main", "train_dpo", "trainer_arguments"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DPOTrainConfig:
    """DPO hyperparameters; defaults are the paper's Table 21."""

    max_length: int = 8000
    """Max sequence length (prompt plus response, tokens)."""
    batch_size: int = 4
    """Examples per optimizer step on one device (see the module table)."""
    gradient_accumulation_steps: int = 1
    learning_rate: float = 5e-7
    epochs: float = 1.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    weight_decay: float = 0.0
    warmup_steps: int = 0
    """Table 21's warmup ratio 0.0: no warmup."""
    beta: float = 0.1
    """DPO beta (eq. 11)."""
    sync_ref_model: bool = True
    """Table 21 lists a reference-model mixup and sync interval: TR-DPO's soft update."""
    ref_model_mixup_alpha: float = 0.6
    ref_model_sync_steps: int = 512
    bf16: bool = True
    """bfloat16 training (the paper does not say; the usual choice on A800s)."""
    lora: bool = False
    """Train a LoRA adapter (peft) instead of all parameters (the paper: all)."""
    lora_r: int = 16
    lora_alpha: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("max_length", "batch_size", "gradient_accumulation_steps"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be greater than 0, got {getattr(self, name)}")
        if self.learning_rate <= 0 or self.epochs <= 0 or self.beta <= 0:
            raise ConfigError("learning_rate, epochs and beta must be greater than 0")
        if self.lora and self.sync_ref_model:
            raise ConfigError(
                "TRL cannot sync the reference model of a LoRA model; "
                "set sync_ref_model=False with lora=True"
            )


def trainer_arguments(config: DPOTrainConfig, output_dir: str | Path) -> dict[str, Any]:
    """The keyword arguments of ``trl.DPOConfig`` for ``config``."""
    return {
        "output_dir": str(output_dir),
        "max_length": config.max_length,
        "per_device_train_batch_size": config.batch_size,
        "gradient_accumulation_steps": config.gradient_accumulation_steps,
        "learning_rate": config.learning_rate,
        "num_train_epochs": config.epochs,
        "optim": "adamw_torch",
        "adam_beta1": config.adam_beta1,
        "adam_beta2": config.adam_beta2,
        "adam_epsilon": config.adam_epsilon,
        "weight_decay": config.weight_decay,
        "warmup_steps": config.warmup_steps,
        "beta": config.beta,
        "sync_ref_model": config.sync_ref_model,
        "ref_model_mixup_alpha": config.ref_model_mixup_alpha,
        "ref_model_sync_steps": config.ref_model_sync_steps,
        "bf16": config.bf16,
        "seed": config.seed,
        "report_to": "none",
    }


def _require(package: str) -> ModuleType:
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise MissingExtraError(package, "dpo") from exc


def load_preference_rows(path: str | Path) -> list[dict[str, Any]]:
    """The preference rows of a JSONL file, each checked for ``prompt``, ``chosen`` and
    ``rejected``."""
    rows = []
    with Path(path).open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"not JSON ({exc})", path=str(path), line=number) from exc
            missing = {"prompt", "chosen", "rejected"} - set(row if isinstance(row, dict) else ())
            if missing:
                raise InputError(f"missing {sorted(missing)}", path=str(path), line=number)
            rows.append(row)
    if not rows:
        raise InputError("no preference rows", path=str(path))
    return rows


def train_dpo(
    data: str | Path,
    model: str,
    output_dir: str | Path,
    config: DPOTrainConfig | None = None,
) -> Path:
    """Train ``model`` (a Hugging Face name or directory) on the rows in ``data`` and
    save it (or its adapter) to ``output_dir``."""
    config = config or DPOTrainConfig()
    rows = load_preference_rows(data)
    trl = _require("trl")
    datasets = _require("datasets")
    transformers = _require("transformers")
    peft_config = None
    if config.lora:
        peft = _require("peft")
        peft_config = peft.LoraConfig(
            r=config.lora_r, lora_alpha=config.lora_alpha, task_type="CAUSAL_LM"
        )
    policy, tokenizer = _load(transformers, model)
    trainer = trl.DPOTrainer(
        model=policy,
        args=trl.DPOConfig(**trainer_arguments(config, output_dir)),
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    log.info("DPO training on %d preference rows", len(rows))
    trainer.train()
    trainer.save_model(str(output_dir))
    return Path(output_dir)


def _load(transformers: ModuleType, model: str) -> tuple[Any, Any]:
    """``(model, tokenizer)``: a Hugging Face name or directory is passed to TRL as is;
    a ``.gguf`` file (the bundled local model, say) is dequantised by transformers."""
    if not model.endswith(".gguf"):
        return model, transformers.AutoTokenizer.from_pretrained(model)
    path = Path(model)
    if not path.is_file():
        raise InputError("no such GGUF file", path=model)
    kwargs = {"gguf_file": path.name}
    policy = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), **kwargs)
    # The weights are dequantised to plain float tensors on load, but transformers keeps
    # a GGUF "quantizer" marker that its Trainer refuses to train: drop the marker.
    policy.hf_quantizer = None
    policy.is_quantized = False
    if hasattr(policy.config, "quantization_config"):
        del policy.config.quantization_config
    return policy, transformers.AutoTokenizer.from_pretrained(str(path.parent), **kwargs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m quillian.methods.kg_infused.dpo_train",
        description="DPO-train the knowledge-augmentation step (KG-Infused RAG, Table 21).",
    )
    parser.add_argument("data", type=Path, help="preference rows (JSONL, TRL format)")
    parser.add_argument("model", help="Hugging Face model name or directory, or a .gguf file")
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--lora", action="store_true", help="train a LoRA adapter instead")
    parser.add_argument("--max-length", type=int, default=8000, help="tokens (Table 21: 8000)")
    parser.add_argument("--batch-size", type=int, default=4, help="Table 21: 4")
    parser.add_argument("--epochs", type=float, default=1.0, help="Table 21: 1")
    parser.add_argument(
        "--float32", action="store_true", help="train in float32, not bfloat16 (CPUs)"
    )
    args = parser.parse_args(argv)
    config = DPOTrainConfig(
        lora=args.lora,
        sync_ref_model=not args.lora,
        max_length=args.max_length,
        batch_size=args.batch_size,
        epochs=args.epochs,
        bf16=not args.float32,
    )
    train_dpo(args.data, args.model, args.output_dir, config)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
