package kubelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// layout is where one kubelet version puts the files of a pod's CSI volume,
// relative to its root directory, for pod fixtureUID, PV fixturePV of driver
// fixtureDriver with handle "h-1" (its sha256 names the staging directory),
// and what it writes in them.
type layout struct {
	publish      string // NodePublishVolume's target, file system
	staging      string // NodeStageVolume's target, file system
	stagingData  string // vol_data.json beside it (MountDevice)
	blockPublish string // NodePublishVolume's target, block
	blockStaging string // NodeStageVolume's target, block
	blockData    string // the block volume's vol_data.json (NewBlockVolumeMapper)
	podDeviceMap string // where the block device is mapped in the pod's directory
	subPath      string // a subPath bind of the volume for container c
	// file contents as kubelet writes them
	stagingDataJSON, blockDataJSON string
}

const (
	fixtureUID    = "6a2f3c1e-9b4d-4e7a-8c15-3d2e1f0a9b8c"
	fixturePV     = "pvc-0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6"
	fixtureDriver = "example.pav"
)

// layouts are kubelet's paths per supported minor version, as its own code
// builds them: pkg/volume/csi (csi_mounter.go getTargetPath,
// csi_attacher.go makeDeviceMountPath and MountDevice, csi_block.go
// GetStagingPath, getPublishPath and GetPodDeviceMapPath, csi_plugin.go
// NewBlockVolumeMapper) on pkg/kubelet/kubelet_getters.go, and
// pkg/volume/util/subpath. v1.35.4 and v1.37.2 build them alike; 1.37
// changed only when a failed NodePublishVolume removes the target
// directory (not on a remount or for a reconstructed volume).
var layouts = map[string]layout{
	"v1.35": {
		publish:         "pods/" + fixtureUID + "/volumes/kubernetes.io~csi/" + fixturePV + "/mount",
		staging:         "plugins/kubernetes.io/csi/example.pav/54f50aff0c05f509a804604b776c85a23969272c57b2f3054b6e05c7fc6e543f/globalmount",
		stagingData:     "plugins/kubernetes.io/csi/example.pav/54f50aff0c05f509a804604b776c85a23969272c57b2f3054b6e05c7fc6e543f/vol_data.json",
		blockPublish:    "plugins/kubernetes.io/csi/volumeDevices/publish/" + fixturePV + "/" + fixtureUID,
		blockStaging:    "plugins/kubernetes.io/csi/volumeDevices/staging/" + fixturePV,
		blockData:       "plugins/kubernetes.io/csi/volumeDevices/" + fixturePV + "/data/vol_data.json",
		podDeviceMap:    "pods/" + fixtureUID + "/volumeDevices/kubernetes.io~csi/" + fixturePV,
		subPath:         "pods/" + fixtureUID + "/volume-subpaths/" + fixturePV + "/c/0",
		stagingDataJSON: `{"driverName":"example.pav","volumeHandle":"h-1"}`,
		blockDataJSON:   `{"attachmentID":"csi-1","driverName":"example.pav","nodeName":"node-1","specVolID":"` + fixturePV + `","volumeHandle":"h-1"}`,
	},
	"v1.37": {
		publish:         "pods/" + fixtureUID + "/volumes/kubernetes.io~csi/" + fixturePV + "/mount",
		staging:         "plugins/kubernetes.io/csi/example.pav/54f50aff0c05f509a804604b776c85a23969272c57b2f3054b6e05c7fc6e543f/globalmount",
		stagingData:     "plugins/kubernetes.io/csi/example.pav/54f50aff0c05f509a804604b776c85a23969272c57b2f3054b6e05c7fc6e543f/vol_data.json",
		blockPublish:    "plugins/kubernetes.io/csi/volumeDevices/publish/" + fixturePV + "/" + fixtureUID,
		blockStaging:    "plugins/kubernetes.io/csi/volumeDevices/staging/" + fixturePV,
		blockData:       "plugins/kubernetes.io/csi/volumeDevices/" + fixturePV + "/data/vol_data.json",
		podDeviceMap:    "pods/" + fixtureUID + "/volumeDevices/kubernetes.io~csi/" + fixturePV,
		subPath:         "pods/" + fixtureUID + "/volume-subpaths/" + fixturePV + "/c/0",
		stagingDataJSON: `{"driverName":"example.pav","volumeHandle":"h-1"}`,
		blockDataJSON:   `{"attachmentID":"csi-1","driverName":"example.pav","nodeName":"node-1","specVolID":"` + fixturePV + `","volumeHandle":"h-1"}`,
	},
}

// roots: kubelet's default, and k0s's.
var roots = []string{"/var/lib/kubelet", "/var/lib/k0s/kubelet"}

// Every kubelet version the local cluster can be built with has its layout
// here: a new one is checked against kubelet's code before PaV supports it.
func TestEverySupportedVersionHasALayout(t *testing.T) {
	mods, err := filepath.Glob("../hack/cluster/kbuild/versions/v*.mod")
	if err != nil || len(mods) == 0 {
		t.Fatalf("no kubelet versions found in hack/cluster/kbuild/versions: %v", err)
	}
	for _, m := range mods {
		v := strings.TrimSuffix(filepath.Base(m), ".mod")
		minor := v[:strings.LastIndex(v, ".")]
		if _, ok := layouts[minor]; !ok {
			t.Errorf("kubelet %s is supported (hack/cluster/kbuild/versions) but has no layout in layouts", v)
		}
	}
}

func TestPathsAsKubeletBuildsThem(t *testing.T) {
	for version, l := range layouts {
		for _, root := range roots {
			d := Dir(root)
			for _, c := range []struct{ name, got, want string }{
				{"PublishPath", d.PublishPath(fixtureUID, fixturePV), l.publish},
				{"CSIVolumesDir", d.CSIVolumesDir(fixtureDriver), filepath.Dir(filepath.Dir(l.staging))},
				{"CSIBlockVolumesDir", d.CSIBlockVolumesDir(), filepath.Dir(filepath.Dir(l.blockStaging))},
			} {
				if want := filepath.Join(root, c.want); c.got != want {
					t.Errorf("kubelet %s, root %s: %s = %s, kubelet's is %s", version, root, c.name, c.got, want)
				}
			}
		}
	}
}

func TestPodUIDInPath(t *testing.T) {
	for version, l := range layouts {
		for _, root := range roots {
			for _, p := range []string{l.publish, l.blockPublish, l.podDeviceMap, l.subPath} {
				if got, ok := PodUIDInPath(filepath.Join(root, p)); !ok || got != fixtureUID {
					t.Errorf("kubelet %s: PodUIDInPath(%s) = %q, %v; want %s", version, filepath.Join(root, p), got, ok, fixtureUID)
				}
			}
			// kubelet's per-node paths and PaV's pods' directories name no pod
			for _, p := range []string{l.staging, l.blockStaging, l.blockData, "plugins/pav.albertofaria.github.io/pods/pav-staging-" + fixtureUID} {
				if got, ok := PodUIDInPath(filepath.Join(root, p)); ok {
					t.Errorf("kubelet %s: PodUIDInPath(%s) = %q; want none", version, filepath.Join(root, p), got)
				}
			}
		}
	}
	for _, p := range []string{
		"/var/lib/kubelet/pods/not-a-uid/volumes/kubernetes.io~csi/pvc-1/mount",
		"/var/lib/kubelet/pods/" + strings.ReplaceAll(fixtureUID, "-", "") + "/volumes/kubernetes.io~csi/pvc-1/mount",
		"/var/lib/kubelet/pods/{" + fixtureUID + "}/volumes/kubernetes.io~csi/pvc-1/mount",
		"/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-" + fixtureUID + "/x",
		"/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/pvc-" + fixtureUID + "/" + fixtureUID,
		"/somewhere/publish/pvc-1/" + fixtureUID,
	} {
		if got, ok := PodUIDInPath(p); ok {
			t.Errorf("PodUIDInPath(%s) = %q; want none", p, got)
		}
	}
}

func TestIsPublishPathOf(t *testing.T) {
	for version, l := range layouts {
		for _, root := range roots {
			for _, p := range []string{l.publish, l.blockPublish} {
				if !IsPublishPathOf(filepath.Join(root, p), fixturePV) {
					t.Errorf("kubelet %s: IsPublishPathOf(%s, %s) = false", version, filepath.Join(root, p), fixturePV)
				}
				if IsPublishPathOf(filepath.Join(root, p), fixturePV+"x") {
					t.Errorf("kubelet %s: IsPublishPathOf(%s, %sx) = true", version, filepath.Join(root, p), fixturePV)
				}
			}
			for _, p := range []string{l.staging, l.blockStaging, l.blockData, l.podDeviceMap, l.subPath} {
				if IsPublishPathOf(filepath.Join(root, p), fixturePV) {
					t.Errorf("kubelet %s: IsPublishPathOf(%s) = true; not a target path", version, filepath.Join(root, p))
				}
			}
		}
	}
}

func TestPodVolumeOfPath(t *testing.T) {
	for version, l := range layouts {
		for _, root := range roots {
			for _, p := range []string{l.publish, l.blockPublish, l.podDeviceMap, l.subPath} {
				uid, volume, ok := PodVolumeOfPath(filepath.Join(root, p))
				if !ok || uid != fixtureUID || volume != fixturePV {
					t.Errorf("kubelet %s: PodVolumeOfPath(%s) = %q, %q, %v; want %s, %s", version, filepath.Join(root, p), uid, volume, ok, fixtureUID, fixturePV)
				}
			}
			// kubelet's per-node paths, PaV's pods' directories and other
			// paths in a pod's directory are no pod's volume
			for _, p := range []string{l.staging, l.blockStaging, l.blockData,
				"plugins/pav.albertofaria.github.io/pods/pav-staging-" + fixtureUID,
				"pods/" + fixtureUID + "/volumes/kubernetes.io~empty-dir/cache",
				"pods/" + fixtureUID + "/volumes/kubernetes.io~csi/" + fixturePV + "/vol_data.json",
				"pods/" + fixtureUID + "/volumes/kubernetes.io~csi/" + fixturePV + "/mount/inside",
				"pods/" + fixtureUID + "/etc-hosts",
			} {
				if uid, volume, ok := PodVolumeOfPath(filepath.Join(root, p)); ok {
					t.Errorf("kubelet %s: PodVolumeOfPath(%s) = %q, %q; want none", version, filepath.Join(root, p), uid, volume)
				}
			}
		}
	}
}

// TracksVolumes follows kubelet's vol_data.json files: present from
// MountDevice (file system) or the block mapper's creation until
// UnmountDevice or TearDownDevice removed them.
func TestTracksVolumes(t *testing.T) {
	for version, l := range layouts {
		t.Run(version, func(t *testing.T) {
			for _, c := range []struct {
				name, file, content string
			}{
				{"file system", l.stagingData, l.stagingDataJSON},
				{"block", l.blockData, l.blockDataJSON},
			} {
				d := Dir(t.TempDir())
				file := filepath.Join(string(d), c.file)
				writeFile(t, file, c.content)
				if !d.TracksVolumes(fixtureDriver) {
					t.Errorf("%s volume: TracksVolumes with %s = false", c.name, c.file)
				}
				if d.TracksVolumes("other.pav") {
					t.Errorf("%s volume: TracksVolumes of another driver = true", c.name)
				}
				// UnmountDevice removes the file, and the directories unless a
				// mount is left there: the emptied directory is no volume.
				if err := os.Remove(file); err != nil {
					t.Fatal(err)
				}
				if d.TracksVolumes(fixtureDriver) {
					t.Errorf("%s volume: TracksVolumes once %s is gone = true", c.name, c.file)
				}
			}
		})
	}
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestIsUID(t *testing.T) {
	for s, want := range map[string]bool{
		fixtureUID:                              true,
		strings.ToUpper(fixtureUID):             true,
		strings.ReplaceAll(fixtureUID, "-", ""): false,
		"urn:uuid:" + fixtureUID:                false,
		"":                                      false,
	} {
		if got := IsUID(s); got != want {
			t.Errorf("IsUID(%q) = %v, want %v", s, got, want)
		}
	}
}
