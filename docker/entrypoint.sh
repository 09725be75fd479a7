#!/bin/sh
# Arguments after the image name work as they do for redis-server:
#   docker run IMAGE                         -> deadbolt /etc/deadbolt/deadbolt.conf
#   docker run IMAGE --port 7000             -> deadbolt /etc/deadbolt/deadbolt.conf --port 7000
#   docker run IMAGE deadbolt --port 7000    -> the same
#   docker run IMAGE /path/other.conf --x y  -> deadbolt /path/other.conf --x y
#   docker run IMAGE sh                      -> sh (any other program runs as given)
set -e
if [ "${1:-}" = "deadbolt" ]; then
    shift
fi
case "${1:-}" in
    --help|-h|--version|-v)
        exec deadbolt "$1" ;;
    ""|-*)
        # The shipped config first, so directives given here override it (last one wins).
        exec deadbolt /etc/deadbolt/deadbolt.conf "$@" ;;
    *.conf)
        exec deadbolt "$@" ;;
esac
exec "$@"
