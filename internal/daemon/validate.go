package daemon

import (
	"errors"
	"fmt"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/qstats"
)

// ValidateFile checks a config file as `vigil run` and a reload would,
// without starting anything: parsed and validated, then every cluster's
// parts built — rules compiled, TLS files loaded, monitor and failover
// options validated by their owners.
func ValidateFile(path string) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	d := &daemon{cache: newCache(cfg)}
	var errs []error
	for i, cc := range cfg.Clusters {
		key := fmt.Sprintf("clusters[%d]", i)
		slots, _, _, err := planSlots(nil, cc.Servers)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.servers: %w", key, err))
			continue
		}
		if _, err := d.processing(cfg, cc, slots, qstats.New(cfg.Digests.MaxEntries), nil); err != nil {
			errs = append(errs, fmt.Errorf("%s.rules: %w", key, err))
		}
		if _, err := frontendOptions(cc, nil); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
		if err := monitorOptions(cc, slots, nil).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s.monitor: %w", key, err))
		}
		if err := executorOptions(cfg, cc, slots).Engine.Validate(liveNames(slots)); err != nil {
			errs = append(errs, fmt.Errorf("%s.failover: %w", key, err))
		}
	}
	return errors.Join(errs...)
}
