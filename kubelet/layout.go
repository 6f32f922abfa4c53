// Package kubelet is everything PaV assumes about kubelet's directories on a
// node and about how the container runtime shows kubelet's pods: kubelet's
// plugin sockets, its CSI volume state (vol_data.json), the target paths it
// publishes volumes at (and the client pod's UID they contain), and
// containerd's namespace, event topic and labels of kubelet's containers.
// Little of it is a documented API: it is what kubelet's pkg/volume/csi and
// containerd's CRI plugin do, checked per supported kubelet version in
// layout_test.go. It depends on no PaV package.
package kubelet

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/types"
)

// Names of kubelet's CSI volume plugin (pkg/volume/csi): its plugin name,
// the same escaped for a path component ("/" as "~"), and its state file.
const (
	csiPlugin        = "kubernetes.io/csi"
	csiPluginEscaped = "kubernetes.io~csi"
	volDataFile      = "vol_data.json"
	globalMount      = "globalmount"
)

// Dir is a kubelet root directory (kubelet's --root-dir), as the node plugin
// sees it: kubelet's target paths under it are used as they are.
type Dir string

// PluginSocket is where kubelet looks for driver's CSI endpoint once the
// driver registered it; PaV puts it in the driver's own plugin directory.
func (d Dir) PluginSocket(driver string) string {
	return filepath.Join(d.PluginsDir(), driver, "csi.sock")
}

// PluginsDir holds one directory per plugin (PaV's drivers' sockets, PaV's
// pods' directories, kubelet's own CSI state).
func (d Dir) PluginsDir() string { return filepath.Join(string(d), "plugins") }

// RegistrationSocket is where kubelet's plugin watcher discovers driver.
func (d Dir) RegistrationSocket(driver string) string {
	return filepath.Join(string(d), "plugins_registry", driver+"-reg.sock")
}

// CSIVolumesDir is where kubelet keeps driver's file system volumes staged
// once per node: <sha256 of the volume handle>/vol_data.json and
// <sha256>/globalmount (NodeStageVolume's target) per volume, until its
// UnmountDevice succeeds (makeDeviceMountPath).
func (d Dir) CSIVolumesDir(driver string) string {
	return filepath.Join(d.PluginsDir(), csiPlugin, driver)
}

// CSIBlockVolumesDir is where kubelet keeps the state of CSI block volumes,
// whatever their driver: <pv>/data/vol_data.json, staging/<pv>
// (NodeStageVolume's target) and publish/<pv>/<pod uid> (NodePublishVolume's
// target, a file).
func (d Dir) CSIBlockVolumesDir() string {
	return filepath.Join(d.PluginsDir(), csiPlugin, "volumeDevices")
}

// PublishPath is the target path kubelet passes to NodePublishVolume for a
// file system volume of the client pod uid: volume is the PV's name, or for
// an inline volume the name of the pod's volume (csi_mounter.go
// getTargetPath).
func (d Dir) PublishPath(uid types.UID, volume string) string {
	return filepath.Join(d.podDir(uid), "volumes", csiPluginEscaped, volume, "mount")
}

// podDir is kubelet's directory of pod uid, under which it mounts the pod's
// volumes (volumes/<plugin>/<volume>), binds their subPaths
// (volume-subpaths/...) and maps its block volumes
// (volumeDevices/<plugin>/<volume>).
func (d Dir) podDir(uid types.UID) string {
	return filepath.Join(string(d), "pods", string(uid))
}

// TracksVolumes tells whether kubelet still keeps state of volumes of
// driver: a vol_data.json in a per-volume directory for file system volumes
// (kubelet deletes it once UnmountDevice succeeded, and the directory with
// it unless something is still mounted there), and for block volumes a
// volumeDevices/<pv>/data/vol_data.json naming the driver.
func (d Dir) TracksVolumes(driver string) bool {
	if files, _ := filepath.Glob(filepath.Join(d.CSIVolumesDir(driver), "*", volDataFile)); len(files) > 0 {
		return true
	}
	files, _ := filepath.Glob(filepath.Join(d.CSIBlockVolumesDir(), "*", "data", volDataFile))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var data struct {
			DriverName string `json:"driverName"`
		}
		if json.Unmarshal(b, &data) == nil && data.DriverName == driver {
			return true
		}
	}
	return false
}

// PodUIDInPath is the UID of the pod kubelet made p for: p is in that pod's
// directory (.../pods/<uid>/..., e.g. a file system target path, a subPath
// bind or a mapped block device) or is a block volume's target path
// (.../volumeDevices/publish/<pv>/<uid>). Only for paths with no request to
// ask (mount tables, a staging recorded before the client's UID was);
// NodePublishVolume's volume context names the client pod.
func PodUIDInPath(p string) (types.UID, bool) {
	parts := strings.Split(path.Clean(p), "/")
	for i := len(parts) - 2; i >= 0; i-- {
		if parts[i] == "pods" && IsUID(parts[i+1]) {
			return types.UID(parts[i+1]), true
		}
	}
	if n := len(parts); n >= 4 && parts[n-4] == "volumeDevices" && parts[n-3] == "publish" && IsUID(parts[n-1]) {
		return types.UID(parts[n-1]), true
	}
	return "", false
}

// PodVolumeOfPath names the pod and the volume kubelet made p for, when p
// is one of kubelet's paths of a pod's volume: its target path (file system
// or block), a subPath bind of it, or its device mapped in the pod's
// directory. volume is kubelet's name of the volume: the PV's, or an inline
// volume's name in the pod (csi_mounter.go getTargetPath, csi_block.go,
// pkg/volume/util/subpath: the inner volume spec name).
func PodVolumeOfPath(p string) (uid types.UID, volume string, ok bool) {
	parts := strings.Split(path.Clean(p), "/")
	n := len(parts)
	if n >= 4 && parts[n-4] == "volumeDevices" && parts[n-3] == "publish" && IsUID(parts[n-1]) {
		return types.UID(parts[n-1]), parts[n-2], true // block target path
	}
	for i := n - 2; i >= 0; i-- {
		if parts[i] == "pods" && IsUID(parts[i+1]) {
			if volume, ok := volumeInPodDir(parts[i+2:]); ok {
				return types.UID(parts[i+1]), volume, true
			}
			break
		}
	}
	return "", "", false
}

// volumeInPodDir is the volume of a path in a pod's directory (given as
// its components below it): volumes/kubernetes.io~csi/<volume>/mount,
// volumeDevices/kubernetes.io~csi/<volume> or
// volume-subpaths/<volume>/<container>/<index>.
func volumeInPodDir(rest []string) (string, bool) {
	switch {
	case len(rest) == 4 && rest[0] == "volumes" && rest[1] == csiPluginEscaped && rest[3] == "mount",
		len(rest) == 3 && rest[0] == "volumeDevices" && rest[1] == csiPluginEscaped:
		return rest[2], true
	case len(rest) == 4 && rest[0] == "volume-subpaths":
		return rest[1], true
	}
	return "", false
}

// IsPublishPathOf tells whether p is a target path kubelet publishes volume
// (a PV's name) at for some pod: .../pods/<uid>/volumes/kubernetes.io~csi/<volume>/mount
// for a file system, .../volumeDevices/publish/<volume>/<uid> for a block volume.
func IsPublishPathOf(p, volume string) bool {
	parts := strings.Split(path.Clean(p), "/")
	n := len(parts)
	switch {
	case n >= 6 && parts[n-1] == "mount" && parts[n-2] == volume && parts[n-3] == csiPluginEscaped && parts[n-4] == "volumes" &&
		IsUID(parts[n-5]) && parts[n-6] == "pods":
		return true
	case n >= 4 && parts[n-4] == "volumeDevices" && parts[n-3] == "publish" && parts[n-2] == volume && IsUID(parts[n-1]):
		return true
	}
	return false
}

// IsUID tells whether s has the form of an object UID: a UUID in its
// 36-character form, as the API server makes them (uuid.Parse alone also
// takes other spellings).
func IsUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}
