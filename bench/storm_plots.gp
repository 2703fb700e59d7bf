# Plots of bench/run_storm.sh: gnuplot -e "dir='docs/bench'" bench/storm_plots.gp
# Reads {dir}/storm_wall.dat and {dir}/storm_handoff.dat (written by
# bench/storm_report.py), writes {dir}/storm_wall.svg and storm_handoff.svg.
if (!exists("dir")) dir = "docs/bench"
set terminal svg size 900,420 dynamic font "sans,11"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set datafile missing "-"
set grid ytics
set key outside right top
set xtics rotate by -25 noenhanced

set output dir."/storm_wall.svg"
set title "SPMD storm: wall minus the ideal (the compiles alone), per step, median (lower is better)"
set ylabel "ms per step"
set yrange [0:*]
plot dir."/storm_wall.dat" using 2:xtic(1) title "daemon", \
     "" using 3 title "legacy, 0.1 s poll (assumed)", \
     "" using 4 title "legacy, 1 s poll (assumed)", \
     "" using 5 title "fallback (no daemon)", \
     "" using 6 title "floor (no protocol)"

set output dir."/storm_handoff.svg"
set title "Release to every waiter holding the path (notification), and each rank's read (median of the repetitions)"
set ylabel "ms"
set yrange [*:*]
set logscale y
plot dir."/storm_handoff.dat" using 2:xtic(1) title "notification p50", \
     "" using 3 title "notification p99", \
     "" using 4 title "read p50", \
     "" using 5 title "read p99"
