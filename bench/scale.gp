# Plot of bench/run_scale.sh's data (docs/bench/scale.dat).
set terminal svg size 720,400 dynamic font "sans,11"
set output "docs/bench/scale.svg"
set title "neffd vs. index size (medians of 5 daemon starts)"
set logscale x 10
set xlabel "index entries"
set ylabel "start to SERVING (ms)"
set y2label "RSS (MiB)"
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
set grid
set key top left
plot "docs/bench/scale.dat" using 1:2 with linespoints lw 2 title "start to SERVING (ms)", \
     "" using 1:3 axes x1y2 with linespoints lw 2 title "RSS after start (MiB)", \
     "" using 1:4 axes x1y2 with linespoints lw 2 title "RSS after lookups (MiB)"
