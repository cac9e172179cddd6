#!/usr/bin/env python
"""python train_unified.py --benchmark mbpp --problems 4 --rounds 2 [KEY=VALUE ...]

Thin entry point: parse flags into Hydra overrides, compose and validate the config once, run `train(cfg)`.
vLLM may start worker processes that re-import this file, hence the __main__ guard.
"""

import os
import sys


def main(argv=None) -> int:
    from unified.cli import exit_code

    return exit_code(lambda: _run(argv))


def _run(argv) -> int:
    from unified.cli import parse_args
    from unified.config import load_config, to_yaml

    args, overrides = parse_args(argv)
    _, cfg = load_config(overrides)  # validated once: `train` runs with this very TrainConfig
    if cfg.trainer.gpus is not None:  # --gpu or trainer.gpus=...: before anything touches CUDA
        os.environ["CUDA_VISIBLE_DEVICES"] = str(cfg.trainer.gpus)
    if args.cfg:
        print(to_yaml(cfg))
        return 0
    from unified.quiet import quiet_console

    quiet_console(verbose=bool(cfg.trainer.verbose))  # before torch and vLLM are imported
    from unified.run.loop import train

    return train(cfg)


if __name__ == "__main__":
    sys.exit(main())
