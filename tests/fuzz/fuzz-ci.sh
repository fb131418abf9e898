#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# The CI run of ummunot-fuzz (listed in vm-suite.txt, so `scripts/vm test`
# runs it on every kernel): a fresh seed each time, printed first with the
# command line that reproduces it; at most 150000 calls or 25 s; 3 processes
# x 3 threads.
exec ./ummunot-fuzz --calls 150000 --duration 25 --procs 3 --threads 3 "$@"
