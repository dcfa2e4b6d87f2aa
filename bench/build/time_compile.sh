#!/usr/bin/env bash
# Compiler launcher for cold_build.sh: runs one compile under GNU time and appends
# "user sys wall object" to $SPK_COMPILE_TIMES.
obj=unknown prev=
for arg in "$@"; do
  [[ $prev == -o ]] && obj=$arg
  prev=$arg
done
exec /usr/bin/time -a -o "${SPK_COMPILE_TIMES:?}" -f "%U %S %e $obj" "$@"
