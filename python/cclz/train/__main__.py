"""python -m cclz.train [options]  |  python -m cclz.train compare RUN_A RUN_B [--out DIR]"""
import sys


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "compare":
        from .compare import main as compare_main

        return compare_main(argv[1:])
    from .cli import main as train_main

    return train_main(argv)


if __name__ == "__main__":
    sys.exit(main())
