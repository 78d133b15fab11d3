import Foundation
import GRDB
import PostgresNIO

/// A result row read by column position, whichever engine read it: what lets the
/// mapping from rows to the store's models be written once (`ClaimMapping`,
/// `RecipientsFold`) while each engine keeps its own SQL.
///
/// A column holding the wrong type is a bug in the statement beside the mapping,
/// not bad input: GRDB stops the process on it, PostgreSQL's rows throw.
protocol StoreRow {
    /// The engine's own bytes: compared as they are, copied only when they differ
    /// from the previous row's (see `SharedPayloads`).
    associatedtype Bytes: Equatable

    func int64(_ column: Int) throws -> Int64
    func optionalInt64(_ column: Int) throws -> Int64?
    func int(_ column: Int) throws -> Int
    func optionalInt(_ column: Int) throws -> Int?
    func string(_ column: Int) throws -> String
    func optionalString(_ column: Int) throws -> String?
    /// SQLite keeps a boolean as 0 or 1, PostgreSQL as a boolean: both read as one.
    func bool(_ column: Int) throws -> Bool
    func optionalBool(_ column: Int) throws -> Bool?
    func bytes(_ column: Int) throws -> Bytes
    static func array(_ bytes: Bytes) -> [UInt8]
}

extension Row: StoreRow {
    func int64(_ column: Int) -> Int64 { self[column] }
    func optionalInt64(_ column: Int) -> Int64? { self[column] }
    func int(_ column: Int) -> Int { self[column] }
    func optionalInt(_ column: Int) -> Int? { self[column] }
    func string(_ column: Int) -> String { self[column] }
    func optionalString(_ column: Int) -> String? { self[column] }
    func bool(_ column: Int) -> Bool { self[column] }
    func optionalBool(_ column: Int) -> Bool? { self[column] }
    func bytes(_ column: Int) -> Data { self[column] }
    static func array(_ bytes: Data) -> [UInt8] { Array(bytes) }
}

extension PostgresRandomAccessRow: StoreRow {
    func int64(_ column: Int) throws -> Int64 { try get(column) }
    func optionalInt64(_ column: Int) throws -> Int64? { try get(column) }
    func int(_ column: Int) throws -> Int { try get(column) }
    func optionalInt(_ column: Int) throws -> Int? { try get(column) }
    func string(_ column: Int) throws -> String { try get(column) }
    func optionalString(_ column: Int) throws -> String? { try get(column) }
    func bool(_ column: Int) throws -> Bool { try get(column) }
    func optionalBool(_ column: Int) throws -> Bool? { try get(column) }
    func bytes(_ column: Int) throws -> ByteBuffer { try get(column) }
    static func array(_ bytes: ByteBuffer) -> [UInt8] { Array(bytes.readableBytesView) }
}

extension StoreRow {
    /// Column `column`'s bytes, copied out of the engine's buffer.
    func byteArray(_ column: Int) throws -> [UInt8] { Self.array(try bytes(column)) }
}
