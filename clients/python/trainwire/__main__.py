"""`python3 -m trainwire COMMAND`: the stream tools of trainwire.wire behind argparse.

Exit status as in the Go tools (README): 0 ok, 1 I/O error, 2 malformed input, 80 bad usage.
"""

import argparse
import sys

EXIT_USAGE = 80


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse exits 2 on bad usage; 2 means malformed input here
        self.print_usage(sys.stderr)
        sys.stderr.write("%s: error: %s\n" % (self.prog, message))
        sys.exit(EXIT_USAGE)


def _int(s):
    try:
        return int(s, 0)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not an integer" % s) from None


def parser():
    p = _Parser(prog="python3 -m trainwire",
                description="Read, check and write trainwire streams (docs/wire.md).",
                epilog="exit status: 0 ok, 1 I/O error, 2 malformed input, 80 bad usage")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    sub.add_parser("sample", help="write a deterministic sample stream (every frame type) to stdout")
    for name, what in (("roundtrip", "read streams from stdin strictly, write them canonically to stdout"),
                       ("dump", "print streams from stdin as JSON lines")):
        s = sub.add_parser(name, help=what)
        s.add_argument("--max-payload", type=_int, metavar="N",
                       help="largest bin in bytes (default $TRAINWIRE_MAX_PAYLOAD, else 4 GiB-1)")
        s.add_argument("--max-elems", type=_int, metavar="N",
                       help="most elements in an array or map (default $TRAINWIRE_MAX_ELEMS, else 1 Mi)")
        if name == "dump":
            s.add_argument("--values", type=_int, default=0, metavar="N",
                           help="print the first N values of every dense frame")
    return p


def main(argv=None):
    a = parser().parse_args(argv)
    from trainwire import wire
    args = [a.cmd]
    for k in ("max_payload", "max_elems", "values"):
        v = getattr(a, k, None)
        if v is not None:
            args += ["--" + k.replace("_", "-"), str(v)]
    return wire.main(args)


if __name__ == "__main__":
    sys.exit(main())
