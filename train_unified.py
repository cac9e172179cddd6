#!/usr/bin/env python
"""python train_unified.py --benchmark mbpp --problems 4 --rounds 2 [KEY=VALUE ...]

Thin entry point: parse flags into Hydra overrides, compose the config, run `train(cfg)`.
vLLM may start worker processes that re-import this file, hence the __main__ guard.
"""

import os
import sys


def main(argv=None) -> int:
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # vLLM's INFO lines drown the round summaries
    from unified.cli import parse_args
    from unified.config import UserError, compose_config, to_yaml

    try:
        args, overrides = parse_args(argv)
        if args.gpu is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu
        cfg = compose_config(overrides)
        if args.cfg:
            print(to_yaml(cfg))
            return 0
        from unified.loop import train

        return train(cfg)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
