package wire

// Command bytes (the first byte of a client command packet).
const (
	ComSleep            byte = 0x00
	ComQuit             byte = 0x01
	ComInitDB           byte = 0x02
	ComQuery            byte = 0x03
	ComFieldList        byte = 0x04
	ComCreateDB         byte = 0x05
	ComDropDB           byte = 0x06
	ComRefresh          byte = 0x07
	ComShutdown         byte = 0x08
	ComStatistics       byte = 0x09
	ComProcessInfo      byte = 0x0a
	ComConnect          byte = 0x0b
	ComProcessKill      byte = 0x0c
	ComDebug            byte = 0x0d
	ComPing             byte = 0x0e
	ComChangeUser       byte = 0x11
	ComBinlogDump       byte = 0x12
	ComStmtPrepare      byte = 0x16
	ComStmtExecute      byte = 0x17
	ComStmtSendLongData byte = 0x18
	ComStmtClose        byte = 0x19
	ComStmtReset        byte = 0x1a
	ComSetOption        byte = 0x1b
	ComStmtFetch        byte = 0x1c
	ComResetConnection  byte = 0x1f
)

// Capability flags (CLIENT_*), as negotiated in the handshake.
const (
	CapLongPassword     uint32 = 1 << 0
	CapFoundRows        uint32 = 1 << 1
	CapLongFlag         uint32 = 1 << 2
	CapConnectWithDB    uint32 = 1 << 3
	CapNoSchema         uint32 = 1 << 4
	CapCompress         uint32 = 1 << 5
	CapODBC             uint32 = 1 << 6
	CapLocalFiles       uint32 = 1 << 7
	CapIgnoreSpace      uint32 = 1 << 8
	CapProtocol41       uint32 = 1 << 9
	CapInteractive      uint32 = 1 << 10
	CapSSL              uint32 = 1 << 11
	CapIgnoreSigpipe    uint32 = 1 << 12
	CapTransactions     uint32 = 1 << 13
	CapReserved         uint32 = 1 << 14
	CapSecureConnection uint32 = 1 << 15
	CapMultiStatements  uint32 = 1 << 16
	CapMultiResults     uint32 = 1 << 17
	CapPSMultiResults   uint32 = 1 << 18
	CapPluginAuth       uint32 = 1 << 19
	CapConnectAttrs     uint32 = 1 << 20
	CapPluginAuthLenenc uint32 = 1 << 21
	CapExpiredPasswords uint32 = 1 << 22
	CapSessionTrack     uint32 = 1 << 23
	CapDeprecateEOF     uint32 = 1 << 24
)

// Server status flags (SERVER_STATUS_*), carried by OK and EOF packets.
const (
	StatusInTrans            uint16 = 0x0001
	StatusAutocommit         uint16 = 0x0002
	StatusMoreResults        uint16 = 0x0008
	StatusNoGoodIndexUsed    uint16 = 0x0010
	StatusNoIndexUsed        uint16 = 0x0020
	StatusCursorExists       uint16 = 0x0040
	StatusLastRowSent        uint16 = 0x0080
	StatusDBDropped          uint16 = 0x0100
	StatusNoBackslashEscapes uint16 = 0x0200
	StatusMetadataChanged    uint16 = 0x0400
	StatusQueryWasSlow       uint16 = 0x0800
	StatusPSOutParams        uint16 = 0x1000
	StatusInTransReadonly    uint16 = 0x2000
	StatusSessionStateChange uint16 = 0x4000
)

// First bytes of response packets.
const (
	okHeader          byte = 0x00
	localInfileHeader byte = 0xfb
	eofHeader         byte = 0xfe
	errHeader         byte = 0xff
)

// MaxPacketPayload is the largest payload of one physical packet; a logical
// packet of this size or more continues in the next physical packet.
const MaxPacketPayload = 1<<24 - 1

// Auth plugin names.
const (
	NativePassword      = "mysql_native_password"
	CachingSha2Password = "caching_sha2_password"
)

// DefaultCollation is utf8mb4_general_ci, present in every MariaDB and
// MySQL version the gateway supports.
const DefaultCollation byte = 45

// ErOptionPreventsStatement (1290) is MariaDB's "running with the
// --read-only option" error.
const ErOptionPreventsStatement = 1290
