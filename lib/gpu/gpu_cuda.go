//go:build cuda

package gpu

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"unsafe"

	"gorgonia.org/cu"
)

// Built reports whether this binary was built with CUDA support
// (-tags cuda).
const Built = true

// Open opens GPU ordinal (0 is the first), retains its primary context and
// loads the embedded PTX (JIT-compiled by the driver for this GPU).
//
// Note that a binary built with -tags cuda exits at start-up, before main,
// when no CUDA driver is present: gorgonia.org/cu's init calls cuInit and
// exits on failure. Ship it as a separate binary.
func Open(ordinal int) (*Device, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("gpu: counting devices: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("gpu: device %d does not exist (%d CUDA devices)", ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("gpu: device %d: %w", ordinal, err)
	}
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return nil, fmt.Errorf("gpu: device %d: retaining its context: %w", ordinal, err)
	}
	if err := cu.SetCurrentContext(ctx); err != nil {
		return nil, fmt.Errorf("gpu: device %d: %w", ordinal, err)
	}
	be := &cuBackend{dev: dev, ctx: ctx, fns: map[string]cu.Function{}}
	name, _ := dev.Name()
	be.desc = fmt.Sprintf("%s (device %d, CUDA driver %d)", name, ordinal, cu.Version())
	for file, src := range PTX() {
		m, err := cu.LoadData(src)
		if err != nil {
			return nil, fmt.Errorf("gpu: loading %s (PTX JIT): %w", file, err)
		}
		be.mods = append(be.mods, m)
		for _, line := range strings.Split(src, "\n") {
			if i := strings.Index(line, ".entry "); i >= 0 {
				k := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line[i+7:]), "("))
				fn, err := m.Function(k)
				if err != nil {
					return nil, fmt.Errorf("gpu: %s: kernel %s: %w", file, k, err)
				}
				be.fns[k] = fn
			}
		}
	}
	return newDevice(be), nil
}

// cuBackend drives the GPU through gorgonia.org/cu. Every call pins the
// goroutine to its OS thread and makes the primary context current there.
type cuBackend struct {
	dev  cu.Device
	ctx  cu.CUContext
	mods []cu.Module
	fns  map[string]cu.Function
	desc string
	// stage is the page-locked staging buffer of small copies (staging).
	stage []byte
}

func (b *cuBackend) name() string { return b.desc }

func (b *cuBackend) enter() (func(), error) {
	runtime.LockOSThread()
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("gpu: making the context current: %w", err)
	}
	return runtime.UnlockOSThread, nil
}

func (b *cuBackend) alloc(bytes int64) (dptr, error) {
	leave, err := b.enter()
	if err != nil {
		return 0, err
	}
	defer leave()
	p, err := cu.MemAlloc(bytes)
	return dptr(p), err
}

func (b *cuBackend) free(p dptr) {
	leave, err := b.enter()
	if err != nil {
		return
	}
	defer leave()
	_ = cu.MemFree(cu.DevicePtr(p))
}

func (b *cuBackend) htod(dst dptr, src []byte) error {
	leave, err := b.enter()
	if err != nil {
		return err
	}
	defer leave()
	if len(src) <= stageMax {
		st, err := b.staging()
		if err != nil {
			return err
		}
		copy(st, src)
		return cu.MemcpyHtoD(cu.DevicePtr(dst), unsafe.Pointer(&st[0]), int64(len(src)))
	}
	return cu.MemcpyHtoD(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src)))
}

func (b *cuBackend) dtoh(dst []byte, src dptr) error {
	leave, err := b.enter()
	if err != nil {
		return err
	}
	defer leave()
	if len(dst) <= stageMax {
		st, err := b.staging()
		if err != nil {
			return err
		}
		if err := cu.MemcpyDtoH(unsafe.Pointer(&st[0]), cu.DevicePtr(src), int64(len(dst))); err != nil {
			return err
		}
		copy(dst, st)
		return nil
	}
	return cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), cu.DevicePtr(src), int64(len(dst)))
}

func (b *cuBackend) memset0(p dptr, bytes int64) error {
	if bytes == 0 {
		return nil
	}
	leave, err := b.enter()
	if err != nil {
		return err
	}
	defer leave()
	return cu.MemsetD8(cu.DevicePtr(p), 0, bytes)
}

func (b *cuBackend) dtod(dst, src dptr, bytes int64) error {
	if bytes == 0 {
		return nil
	}
	leave, err := b.enter()
	if err != nil {
		return err
	}
	defer leave()
	return cu.MemcpyDtoD(cu.DevicePtr(dst), cu.DevicePtr(src), bytes)
}

func (b *cuBackend) launch(name string, grid, block, shared int, args ...any) error {
	fn, ok := b.fns[name]
	if !ok {
		return fmt.Errorf("no kernel %q in the PTX", name)
	}
	vals := make([]uint64, len(args))
	params := make([]unsafe.Pointer, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case dptr:
			vals[i] = uint64(v)
		case uint64:
			vals[i] = v
		case float64:
			vals[i] = math.Float64bits(v)
		default:
			return fmt.Errorf("kernel %s: argument %d has type %T (want dptr, uint64 or float64)", name, i, a)
		}
		params[i] = unsafe.Pointer(&vals[i])
	}
	leave, err := b.enter()
	if err != nil {
		return err
	}
	defer leave()
	if err := fn.Launch(grid, 1, 1, block, 1, 1, shared, cu.NoStream, params); err != nil {
		return err
	}
	// Synchronous: a kernel fault surfaces at its own launch, named.
	return cu.Synchronize()
}

func (b *cuBackend) sync() error {
	leave, err := b.enter()
	if err != nil {
		return err
	}
	defer leave()
	return cu.Synchronize()
}

func (b *cuBackend) close() error {
	leave, err := b.enter()
	if err != nil {
		return err
	}
	defer leave()
	for _, m := range b.mods {
		_ = m.Unload()
	}
	b.mods = nil
	b.freeStaging()
	return b.dev.ReleasePrimaryCtx()
}
