package codec

// PowerSGD's three products (the codec's Encode and decode, and
// PowerSGDPlan's distributed steps share them). Each output element is
// accumulated in the order of the plain loops: P[i][t] over j ascending,
// Q[j][t] over i ascending, (P·Qᵀ)[i][j] over t ascending, so the bits do
// not depend on how the work is split among workers; rank 4 (the common
// case) keeps its four accumulators in registers. The twins are in
// lowrank_test.go.

// minRowsPerWorker keeps small matrices on one goroutine.
const minRowsPerWorker = 64

// rowChunks splits n rows among the workers a product of n×m elements
// deserves.
func rowChunks(n, m int) [][2]int {
	w := workers(0, n*m)
	w = max(1, min(w, n/minRowsPerWorker))
	return chunks(n, w, 1)
}

// mulMQ sets p (n×r, float64) to M·Q for M (n×m, row-major) and q (m×r).
func mulMQ(p []float64, x, q []float32, n, m, r int) {
	parallel(rowChunks(n, m), func(_ int, lo, hi int) {
		if r == 4 && haveAVX2 && m > 0 {
			// Four rows at a time: four chains of additions at once.
			var out [16]float64
			for ; lo+4 <= hi; lo += 4 {
				dot4x4AVX2(&x[lo*m : (lo+4)*m][0], m, &q[:4*m][0], &out)
				copy(p[4*lo:4*lo+16], out[:])
			}
		}
		for i := lo; i < hi; i++ {
			row := x[i*m : (i+1)*m]
			pi := p[i*r : (i+1)*r]
			if r == 4 {
				pi[0], pi[1], pi[2], pi[3] = dot4(row, q)
				continue
			}
			clear(pi)
			for j, v := range row {
				if v == 0 {
					continue
				}
				qj := q[j*r : (j+1)*r]
				for t := range pi {
					pi[t] += float64(v) * float64(qj[t])
				}
			}
		}
	})
}

// dot4 is row·Q for a rank-4 q, each column summed over j ascending.
func dot4(row, q []float32) (a0, a1, a2, a3 float64) {
	q = q[:4*len(row)]
	for j, v := range row {
		if v == 0 {
			continue
		}
		qj := q[4*j : 4*j+4 : 4*j+4]
		fv := float64(v)
		a0 += fv * float64(qj[0])
		a1 += fv * float64(qj[1])
		a2 += fv * float64(qj[2])
		a3 += fv * float64(qj[3])
	}
	return
}

// mulMtP sets q (m×r, float64) to Mᵀ·P for M (n×m) and p (n×r): the
// workers split the columns j, each going through every row in order.
func mulMtP(q []float64, x, p []float32, n, m, r int) {
	clear(q)
	parallel(rowChunks(m, n), func(_ int, lo, hi int) {
		for i := 0; i < n; i++ {
			row := x[i*m+lo : i*m+hi]
			pi := p[i*r : (i+1)*r]
			qs := q[lo*r : hi*r]
			if r == 4 {
				axpy4(qs, row, float64(pi[0]), float64(pi[1]), float64(pi[2]), float64(pi[3]))
				continue
			}
			for j, v := range row {
				if v == 0 {
					continue
				}
				qj := qs[j*r : (j+1)*r]
				for t := range qj {
					qj[t] += float64(v) * float64(pi[t])
				}
			}
		}
	})
}

// axpy4 adds row[j]·(p0, p1, p2, p3) to q's rank-4 rows: axpy4AVX2
// where the CPU has AVX2, else axpy4Go.
func axpy4(q []float64, row []float32, p0, p1, p2, p3 float64) {
	if haveAVX2 && len(row) > 0 {
		p := [4]float64{p0, p1, p2, p3}
		axpy4AVX2(&q[:4*len(row)][0], &row[0], len(row), &p)
		return
	}
	axpy4Go(q, row, p0, p1, p2, p3)
}

// axpy4Go is axpy4 in pure Go.
func axpy4Go(q []float64, row []float32, p0, p1, p2, p3 float64) {
	q = q[:4*len(row)]
	for j, v := range row {
		if v == 0 {
			continue
		}
		qj := q[4*j : 4*j+4 : 4*j+4]
		fv := float64(v)
		qj[0] += fv * p0
		qj[1] += fv * p1
		qj[2] += fv * p2
		qj[3] += fv * p3
	}
}

// mulPQt writes P·Qᵀ (n×m, float32) into dst for p (n×r) and q (m×r).
func mulPQt(dst, p, q []float32, n, m, r int) {
	parallel(rowChunks(n, m), func(_ int, lo, hi int) {
		for i := lo; i < hi; i++ {
			pi := p[i*r : (i+1)*r]
			row := dst[i*m : (i+1)*m]
			if r == 4 {
				outer4(row, q, pi[0], pi[1], pi[2], pi[3])
				continue
			}
			for j := range row {
				qj := q[j*r : (j+1)*r]
				var s float32
				for t := range pi {
					s += pi[t] * qj[t]
				}
				row[j] = s
			}
		}
	})
}

// outer4 sets row[j] to (p0, p1, p2, p3)·q[j] for a rank-4 q, summed from
// +0 in order as the plain loop does: outer4AVX2 eight at a time where the
// CPU has AVX2, outer4Go for the rest.
func outer4(row, q []float32, p0, p1, p2, p3 float32) {
	q = q[:4*len(row)]
	k := 0
	if haveAVX2 && len(row) >= 8 {
		k = len(row) / 8 * 8
		p := [4]float32{p0, p1, p2, p3}
		outer4AVX2(&row[0], &q[0], k, &p)
	}
	outer4Go(row[k:], q[4*k:], p0, p1, p2, p3)
}

// outer4Go is outer4 in pure Go.
func outer4Go(row, q []float32, p0, p1, p2, p3 float32) {
	q = q[:4*len(row)]
	for j := range row {
		qj := q[4*j : 4*j+4 : 4*j+4]
		var s float32
		s += p0 * qj[0]
		s += p1 * qj[1]
		s += p2 * qj[2]
		s += p3 * qj[3]
		row[j] = s
	}
}
