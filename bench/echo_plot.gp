# bench/echo_plot.gp - draws bench/echo.sh's figures: round trips per
# second against connections, one line per server, one panel per message
# size.
#
#   gnuplot -e "csv='build/bench/echo.csv'; out='docs/img/echo.svg'" bench/echo_plot.gp
#
# (make bench-plot does this.) The CSV's columns: conns, size, impl, rtps,
# p50_us, p99_us, p999_us, errors, connected.

if (!exists("csv")) csv = "build/bench/echo.csv"
if (!exists("out")) out = "docs/img/echo.svg"

# The servers measured, in a fixed order (so each keeps its colour between
# plots), and the sizes measured, smallest first.
column_values(col, sort) = system("awk -F, 'NR > 1 { print $" . col . " }' '" . csv . \
                                  "' | sort " . sort . " | tr '\\n' ' '")
all_impls = "goro epoll1 epoll2 libevent go"
colour(im) = sum [k = 1:words(all_impls)] (word(all_impls, k) eq im ? k : 0)
measured = " " . column_values(3, "-u")
impls = ""
do for [im in all_impls] {
    if (strstrt(measured, " " . im . " ") > 0) { impls = impls . " " . im }
}
sizes = column_values(2, "-nu")
nsizes = words(sizes)
if (nsizes == 0) { print "echo_plot: no figures in ", csv; exit status 1 }

set terminal svg size (480 * nsizes), 400 dynamic enhanced font "sans,11"
set output out
set key bottom left
set logscale x
set xrange [50:20000]
set xtics ("100" 100, "1000" 1000, "10000" 10000)
set format y "%.0s%c"
set yrange [0:*]
set grid ytics
set xlabel "connections"
set ylabel "round trips / s"

# One server at one size: "connections round-trips/s" rows, via awk (a
# filter inside gnuplot leaves gaps that break the line).
series(sz, im) = sprintf("< awk -F, 'NR > 1 && $2 == %d && $3 == \"%s\" { print $1, $4 }' '%s'", \
                         sz, im, csv)

set multiplot layout 1, nsizes title "TCP echo on 127.0.0.1, closed loop per connection"
do for [k = 1:nsizes] {
    sz = word(sizes, k) + 0
    set title sprintf("%d-byte messages", sz)
    # smooth unique: sorted by connections, repeated runs averaged
    plot for [im in impls] series(sz, im) using 1:2 smooth unique \
         with linespoints lt colour(im) lw 2 pt 7 ps 0.6 title im
}
unset multiplot
