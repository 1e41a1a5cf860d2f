#!/usr/bin/env bash
# Session 28, calls 6-7: s28_run5.sh again, at the wheel where a capture also takes the choice timed
# on another stream (semi.py: _timed_on_another_stream).
exec bash "$(dirname "$0")/s28_run5.sh"
