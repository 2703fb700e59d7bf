# Plot of bench/run_publish.sh's data (docs/bench/publish.dat).
set terminal svg size 640,360 dynamic font "sans,11"
set output "docs/bench/publish.svg"
set title "256 MiB NEFF: throughput (median of 5 runs, higher is better)"
set ylabel "MiB/s"
set style fill solid 0.8 border -1
set boxwidth 0.6
set yrange [0:*]
set grid ytics
unset key
plot "docs/bench/publish.dat" using 0:2:xtic(1) with boxes lc rgb "#4477aa", \
     "" using 0:2:(sprintf("%.0f", $2)) with labels offset 0,0.7
